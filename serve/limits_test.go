package serve

import (
	"testing"
)

func TestByteSizeFlag(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"1024", 1024, true}, {"512MiB", 512 << 20, true}, {"2GiB", 2 << 30, true}, {"64KiB", 64 << 10, true},
		{"1.5GiB", 0, false}, {"-1", 0, false}, {"GiB", 0, false}, {"1GB", 0, false}, {"99999999999GiB", 0, false},
	} {
		var b ByteSize
		err := b.Set(tt.in)
		if (err == nil) != tt.ok || (tt.ok && int64(b) != tt.want) {
			t.Errorf("ByteSize.Set(%q) = %d, %v; want %d, ok %v", tt.in, b, err, tt.want, tt.ok)
		}
	}
}
