package projection

import bolt "go.etcd.io/bbolt"

// Projects lists every project that has an event in the projections, in
// order. It reads one key per project (the project feed is keyed by project
// first), however long the feeds are.
func (s *Store) Projects() ([]string, error) {
	var out []string
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bktFeed).Cursor()
		for k, _ := c.First(); k != nil; {
			var project string
			for i := 0; i+1 < len(k); i++ {
				if k[i] == 0 && k[i+1] == 0 {
					project = string(unescape(k[:i]))
					break
				}
				if k[i] == 0 {
					i++
				}
			}
			out = append(out, project)
			next := key(project)
			next[len(next)-1] = 0x01 // just past every key of this project
			k, _ = c.Seek(next)
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
