package dbconn

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
)

// Identity names one running server. Two endpoints with the same Identity
// reach the same server, whatever their addresses (a proxy, a second
// address, a socket): MySQL's @@server_uuid where the server has one,
// otherwise MariaDB's @@server_id with the host name, port, socket and
// data directory, which no two servers on one host share.
type Identity struct {
	UUID     string
	ServerID uint32
	Host     string
	Port     int
	Socket   string
	DataDir  string
}

// Same reports whether a and b name one server.
func (a Identity) Same(b Identity) bool {
	if a.UUID != "" || b.UUID != "" {
		return a.UUID == b.UUID
	}
	return a == b
}

func (a Identity) String() string {
	if a.UUID != "" {
		return "server_uuid " + a.UUID
	}
	return fmt.Sprintf("server_id %d on %s port %d", a.ServerID, a.Host, a.Port)
}

// ServerIdentity reads db's Identity (@@global.server_id: a session may
// carry another, SessionServerID).
func ServerIdentity(ctx context.Context, db *sql.DB) (Identity, error) {
	var id Identity
	var sock, dir sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT @@global.server_id, @@hostname, @@port, @@socket, @@datadir").Scan(&id.ServerID, &id.Host, &id.Port, &sock, &dir); err != nil {
		return id, err
	}
	id.Socket, id.DataDir = sock.String, dir.String
	var uuid sql.NullString
	err := db.QueryRowContext(ctx, "SELECT @@server_uuid").Scan(&uuid)
	var me *mysql.MySQLError
	switch {
	case err == nil:
		id.UUID = uuid.String
	case errors.As(err, &me) && me.Number == 1193: // MariaDB: unknown system variable
	default:
		return id, err
	}
	return id, nil
}

// SameServer reports whether source and target are one server.
func SameServer(ctx context.Context, source, target sluice.Endpoint) (bool, Identity, error) {
	var ids [2]Identity
	for i, e := range []struct {
		role string
		ep   sluice.Endpoint
	}{{"source", source}, {"target", target}} {
		db, err := Open(ctx, e.role, e.ep, Options{MaxOpen: 1})
		if err != nil {
			return false, Identity{}, err
		}
		ids[i], err = ServerIdentity(ctx, db)
		db.Close()
		if err != nil {
			return false, Identity{}, Classify(err, e.role, e.ep)
		}
	}
	return ids[0].Same(ids[1]), ids[0], nil
}
