package kernel_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/turnledger/turnledger/kernel"
)

// idPattern is the documented rule ValidID implements with a loop.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

func TestValidIDIsThePattern(t *testing.T) {
	for _, s := range []string{"", "a", "A-z_09", "turn_0123abcd", "a.b", "a b", "a*", "a>", "é", "a\n", "a\x00",
		strings.Repeat("x", 128), strings.Repeat("x", 129), "-", "_", "p1\n"} {
		if got, want := kernel.ValidID(s), idPattern.MatchString(s); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", s, got, want)
		}
	}
}

func FuzzValidIDIsThePattern(f *testing.F) {
	f.Add("turn_01")
	f.Add("a.b")
	f.Add(strings.Repeat("z", 129))
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := kernel.ValidID(s), idPattern.MatchString(s); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", s, got, want)
		}
	})
}
