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

// addCount adds d to the counter at k, deleting it at zero.
func addCount(b *bolt.Bucket, k []byte, d int) error {
	n := int64(getU64(b.Get(k))) + int64(d)
	if n <= 0 {
		return b.Delete(k)
	}
	return b.Put(k, putU64(uint64(n)))
}

func ptr[T any](v T) *T { return &v }
