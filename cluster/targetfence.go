package cluster

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sluice-db/sluice"
)

// ErrStaleOwner means the target has seen a newer owner of the task.
var ErrStaleOwner = errors.New("a newer owner of this task has written to the target")

// FenceTarget records token, the owner's etcd mutex revision, as the task's
// fencing token on the target (sluice_meta.cluster_fence), on conn: the
// session that holds the task's owner lock. It refuses, with ErrStaleOwner,
// a token lower than one already recorded by the same etcd cluster: a
// worker that etcd has replaced never starts applying, whatever its clock
// or its view of etcd says. Tokens of another etcd cluster (rebuilt from
// scratch, so its revisions start again) replace the record.
func FenceTarget(ctx context.Context, conn *sql.Conn, task string, clusterID uint64, token int64, worker string) error {
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS sluice_meta",
		"CREATE TABLE IF NOT EXISTS sluice_meta.cluster_fence (task VARCHAR(128) NOT NULL PRIMARY KEY, " +
			"cluster_id BIGINT UNSIGNED NOT NULL, token BIGINT NOT NULL, worker VARCHAR(128) NOT NULL, " +
			"updated TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)) ENGINE=InnoDB",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("fence task %s on the target: %w", task, err)
		}
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	var cid uint64
	var prev int64
	var who string
	err = tx.QueryRowContext(ctx, "SELECT cluster_id, token, worker FROM sluice_meta.cluster_fence WHERE task = ? FOR UPDATE", task).Scan(&cid, &prev, &who)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("fence task %s on the target: %w", task, err)
	case cid == clusterID && prev > token:
		return &sluice.Error{Op: "start task " + task,
			Err:  fmt.Errorf("%w: its token %d (worker %s) is newer than this worker's %d", ErrStaleOwner, prev, who, token),
			Hint: "nothing to do: this worker lost the task to " + who + " and does not apply it"}
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO sluice_meta.cluster_fence (task, cluster_id, token, worker) VALUES (?, ?, ?, ?) "+
		"ON DUPLICATE KEY UPDATE cluster_id = VALUES(cluster_id), token = VALUES(token), worker = VALUES(worker)", task, clusterID, token, worker); err != nil {
		return fmt.Errorf("fence task %s on the target: %w", task, err)
	}
	return tx.Commit()
}
