package boltstore

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sluice-db/sluice/dtx"
)

// bKV holds dtm's key-value entries (topics): cat 0x00 key -> dtx.KV as
// JSON. They are few and change rarely, so they go straight to bolt (one
// synced commit each) rather than through the log.
var bKV = []byte("kv")

func kvKey(cat, key string) []byte {
	return append(append([]byte(cat), 0), key...)
}

// KVGet implements dtx.KVStore.
func (s *Store) KVGet(ctx context.Context, cat, key string) (*dtx.KV, error) {
	var kv *dtx.KV
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		kv, err = getKV(tx, cat, key)
		return err
	})
	if err == nil && kv == nil {
		err = dtx.ErrNotFound
	}
	return kv, err
}

func getKV(tx *bolt.Tx, cat, key string) (*dtx.KV, error) {
	b := tx.Bucket(bKV)
	if b == nil {
		return nil, nil
	}
	v := b.Get(kvKey(cat, key))
	if v == nil {
		return nil, nil
	}
	var kv dtx.KV
	return &kv, json.Unmarshal(v, &kv)
}

// KVList implements dtx.KVStore.
func (s *Store) KVList(ctx context.Context, cat, after string, limit int) ([]dtx.KV, error) {
	out := []dtx.KV{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bKV)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		var prefix, from []byte
		if cat != "" {
			prefix = append([]byte(cat), 0)
			from = append(append([]byte(nil), prefix...), after...)
		}
		for k, v := c.Seek(from); k != nil && len(out) < limit; k, v = c.Next() {
			if !bytes.HasPrefix(k, prefix) {
				break
			}
			var kv dtx.KV
			if err := json.Unmarshal(v, &kv); err != nil {
				return err
			}
			if after != "" && kv.K <= after {
				continue
			}
			out = append(out, kv)
		}
		return nil
	})
	return out, err
}

// KVPut implements dtx.KVStore.
func (s *Store) KVPut(ctx context.Context, kv *dtx.KV, version uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bKV)
		if err != nil {
			return err
		}
		cur, err := getKV(tx, kv.Cat, kv.K)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		switch {
		case version == 0 && cur != nil:
			return dtx.ErrExists
		case version == 0:
			id, _ := b.NextSequence()
			kv.ID, kv.CreateTime = id, &now
		case cur == nil || cur.Version != version:
			return dtx.ErrConflict
		default:
			kv.ID, kv.CreateTime = cur.ID, cur.CreateTime
		}
		kv.Version, kv.UpdateTime = version+1, &now
		v, err := json.Marshal(kv)
		if err != nil {
			return err
		}
		return b.Put(kvKey(kv.Cat, kv.K), v)
	})
}

// KVDelete implements dtx.KVStore.
func (s *Store) KVDelete(ctx context.Context, cat, key string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bKV)
		if b == nil || b.Get(kvKey(cat, key)) == nil {
			return dtx.ErrNotFound
		}
		return b.Delete(kvKey(cat, key))
	})
}
