package projection

import (
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Projects lists every project that has an event in the projections, in
// order. It reads one key per project (the project feed is keyed by project
// first), however long the feeds are.
func (s *Store) Projects() ([]string, error) {
	var out []string
	err := s.view(func(tx *bolt.Tx) error {
		out = projectsOf(tx.Bucket(bktFeed))
		// A project whose every event is below the retention horizon has
		// no feed entry left (retire.go).
		for _, p := range projectsOf(tx.Bucket(bktHorizonProjects)) {
			if i, found := slices.BinarySearch(out, p); !found {
				out = slices.Insert(out, i, p)
			}
		}
		return nil
	})
	return out, err
}

func unescape(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		out = append(out, b[i])
		if b[i] == 0 {
			i++ // 0x00 0xFF stands for 0x00
		}
	}
	return out
}
