package projection

import (
	"encoding/json"

	bolt "go.etcd.io/bbolt"
)

// JSON values and counters in buckets, for the folds and the queries.

func putJSON(b *bolt.Bucket, k []byte, v any) error {
	buf, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(k, buf)
}

func getJSON(b *bolt.Bucket, k []byte, v any) (bool, error) {
	buf := b.Get(k)
	if buf == nil {
		return false, nil
	}
	return true, json.Unmarshal(buf, v)
}

func ptr[T any](v T) *T { return &v }
