package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice/dtx"
)

const kvColumns = "id, cat, k, v, version, create_time, update_time"

func scanKV(row interface{ Scan(...any) error }) (dtx.KV, error) {
	var kv dtx.KV
	var ct, ut int64
	if err := row.Scan(&kv.ID, &kv.Cat, &kv.K, &kv.V, &kv.Version, &ct, &ut); err != nil {
		return kv, err
	}
	c, u := time.UnixMilli(ct).UTC(), time.UnixMilli(ut).UTC()
	kv.CreateTime, kv.UpdateTime = &c, &u
	return kv, nil
}

// KVGet implements dtx.KVStore.
func (s *Store) KVGet(ctx context.Context, cat, key string) (*dtx.KV, error) {
	kv, err := scanKV(s.db.QueryRowContext(ctx, "SELECT "+kvColumns+" FROM dtx_kv WHERE cat=? AND k=?", cat, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, dtx.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &kv, nil
}

// KVList implements dtx.KVStore.
func (s *Store) KVList(ctx context.Context, cat, after string, limit int) ([]dtx.KV, error) {
	q, args := "SELECT "+kvColumns+" FROM dtx_kv WHERE k > ?", []any{after}
	if cat != "" {
		q += " AND cat = ?"
		args = append(args, cat)
	}
	rows, err := s.db.QueryContext(ctx, q+" ORDER BY k, cat LIMIT ?", append(args, limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []dtx.KV{}
	for rows.Next() {
		kv, err := scanKV(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, kv)
	}
	return out, rows.Err()
}

// KVPut implements dtx.KVStore.
func (s *Store) KVPut(ctx context.Context, kv *dtx.KV, version uint64) error {
	now := time.Now().UTC()
	ms := now.UnixMilli()
	if version == 0 {
		res, err := s.db.ExecContext(ctx, "INSERT INTO dtx_kv (cat, k, v, version, create_time, update_time) VALUES (?, ?, ?, 1, ?, ?)", kv.Cat, kv.K, kv.V, ms, ms)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1062 {
			return dtx.ErrExists
		}
		if err != nil {
			return err
		}
		id, _ := res.LastInsertId()
		kv.ID, kv.Version, kv.CreateTime, kv.UpdateTime = uint64(id), 1, &now, &now
		return nil
	}
	res, err := s.db.ExecContext(ctx, "UPDATE dtx_kv SET v=?, version=version+1, update_time=? WHERE cat=? AND k=? AND version=?", kv.V, ms, kv.Cat, kv.K, version)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return dtx.ErrConflict
	}
	kv.Version, kv.UpdateTime = version+1, &now
	return nil
}

// KVDelete implements dtx.KVStore.
func (s *Store) KVDelete(ctx context.Context, cat, key string) error {
	res, err := s.db.ExecContext(ctx, "DELETE FROM dtx_kv WHERE cat=? AND k=?", cat, key)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return dtx.ErrNotFound
	}
	return nil
}
