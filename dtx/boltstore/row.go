package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"

	bolt "go.etcd.io/bbolt"

	"github.com/sluice-db/sluice/dtx"
)

// A transaction is one value in the global bucket: the row and then its
// branches (verTxn), so that a checkpoint writes one bolt value per
// transaction instead of 1 + one per branch. Stores written before keep a
// row alone (JSON or verBinary) with the branches in the branch bucket,
// one value each; both layouts are read, and a checkpoint's put of such a
// transaction moves it to the new one. Claim and ResetLeases, which only
// change the row, keep the layout they find.

// row is a transaction's value as read.
type row struct {
	g *dtx.Global
	// one: the value holds the branches too, encoded in tail against g
	// (tail points into bolt's memory: valid only during the bolt
	// transaction).
	one   bool
	plain bool // tail's branches are verTxnPlain's
	tail  []byte
}

// getRow reads gid's row; dtx.ErrNotFound when there is none.
func getRow(tx *bolt.Tx, gid string) (*row, error) {
	v := tx.Bucket(bGlobal).Get([]byte(gid))
	if v == nil {
		return nil, dtx.ErrNotFound
	}
	return parseRow(v)
}

// parseRow decodes a global bucket value in any layout and format.
func parseRow(v []byte) (*row, error) {
	if len(v) == 0 || (v[0] != verTxn && v[0] != verTxnPlain) {
		g, err := decodeGlobal(v)
		if err != nil {
			return nil, err
		}
		return &row{g: g}, nil
	}
	d := dec{b: v[1:]}
	r := &row{g: &dtx.Global{}, one: true, plain: v[0] == verTxnPlain}
	d.global(r.g)
	r.tail = d.b
	return r, d.err
}

// branches returns the transaction's branches in insertion order.
func (r *row) branches(tx *bolt.Tx) ([]dtx.Branch, error) {
	if !r.one {
		_, bs, err := bucketBranches(tx, r.g.Gid)
		return bs, err
	}
	d := dec{b: r.tail}
	bs := d.branches(r.g, r.plain)
	if d.err == nil && len(d.b) != 0 {
		d.err = errCorrupt
	}
	return bs, d.err
}

// load reads a transaction from bolt; a nil state's g means not found.
func load(tx *bolt.Tx, gid string) (*state, error) {
	r, err := getRow(tx, gid)
	if errors.Is(err, dtx.ErrNotFound) {
		return &state{}, nil
	}
	if err != nil {
		return nil, err
	}
	bs, err := r.branches(tx)
	if err != nil {
		return nil, err
	}
	return &state{g: r.g, bs: bs}, nil
}

// put writes a transaction's whole state into bolt as one value,
// replacing what is there (in either layout).
func put(tx *bolt.Tx, st *state) error {
	old, err := getRow(tx, st.g.Gid)
	if errors.Is(err, dtx.ErrNotFound) {
		old = nil
	} else if err != nil {
		return err
	}
	var prev *dtx.Global
	if old != nil {
		prev = old.g
		if !old.one {
			if err := deleteBucketBranches(tx, st.g.Gid); err != nil {
				return err
			}
		}
	}
	if err := reindex(tx, prev, st.g); err != nil {
		return err
	}
	return tx.Bucket(bGlobal).Put([]byte(st.g.Gid), encodeTxn(st))
}

// encodeTxn is a transaction's value: the row, then the branches, which
// leave out what they share with the row.
func encodeTxn(st *state) []byte {
	e := enc(make([]byte, 0, 512+64*len(st.bs)))
	e = append(e, verTxn)
	e.global(st.g)
	e.branches(st.g, st.bs)
	return e
}

// putGlobal replaces old's row with g, keeping its branches where they
// are, and moves its index entries.
func putGlobal(tx *bolt.Tx, old *row, g *dtx.Global) error {
	if !old.one {
		if err := reindex(tx, old.g, g); err != nil {
			return err
		}
		return tx.Bucket(bGlobal).Put([]byte(g.Gid), encodeGlobal(g))
	}
	// The branches are encoded against the row: decoded with the old
	// one, encoded again with the new.
	bs, err := old.branches(tx)
	if err != nil {
		return err
	}
	if err := reindex(tx, old.g, g); err != nil {
		return err
	}
	return tx.Bucket(bGlobal).Put([]byte(g.Gid), encodeTxn(&state{g: g, bs: bs}))
}

// deleteRow removes a transaction, its branches and its finished entry.
func deleteRow(tx *bolt.Tx, gid string, finishedKey []byte) error {
	r, err := getRow(tx, gid)
	if err != nil && !errors.Is(err, dtx.ErrNotFound) {
		return err
	}
	if err == nil && !r.one {
		if err := deleteBucketBranches(tx, gid); err != nil {
			return err
		}
	}
	if err := tx.Bucket(bGlobal).Delete([]byte(gid)); err != nil {
		return err
	}
	return tx.Bucket(bFinished).Delete(finishedKey)
}

// reindex moves g's index entries from old's (nil: a new transaction).
func reindex(tx *bolt.Tx, old, g *dtx.Global) error {
	if old != nil {
		if t, ok := dueAt(old); ok {
			if err := tx.Bucket(bDue).Delete(tsKey(t, old.Gid)); err != nil {
				return err
			}
		}
		if old.Finished() {
			if err := tx.Bucket(bFinished).Delete(tsKey(old.FinishTime, old.Gid)); err != nil {
				return err
			}
		}
	}
	if t, ok := dueAt(g); ok {
		if err := tx.Bucket(bDue).Put(tsKey(t, g.Gid), nil); err != nil {
			return err
		}
	}
	if g.Finished() {
		if err := tx.Bucket(bFinished).Put(tsKey(g.FinishTime, g.Gid), nil); err != nil {
			return err
		}
	}
	return nil
}

func branchPrefix(gid string) []byte { return append([]byte(gid), 0) }

// bucketBranches returns the keys and values of a transaction's branches
// in the branch bucket (the layout before one value per transaction).
func bucketBranches(tx *bolt.Tx, gid string) ([][]byte, []dtx.Branch, error) {
	p := branchPrefix(gid)
	var keys [][]byte
	var out []dtx.Branch
	c := tx.Bucket(bBranch).Cursor()
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		b, err := decodeBranch(v)
		if err != nil {
			return nil, nil, err
		}
		keys = append(keys, append([]byte(nil), k...))
		out = append(out, b)
	}
	return keys, out, nil
}

func deleteBucketBranches(tx *bolt.Tx, gid string) error {
	keys, _, err := bucketBranches(tx, gid)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := tx.Bucket(bBranch).Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// bucketKey is the branch bucket's key of a transaction's i-th branch.
func bucketKey(gid string, i int) []byte {
	return binary.BigEndian.AppendUint32(branchPrefix(gid), uint32(i))
}
