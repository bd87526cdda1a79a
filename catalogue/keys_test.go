package catalogue

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHashKey(t *testing.T) {
	got := HashKey("abc").String()
	want := "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got != want {
		t.Errorf("HashKey(abc) = %s, want %s", got, want)
	}
}

func TestParseKeyFile(t *testing.T) {
	a, b := HashKey("alpha"), HashKey("beta")
	file := "# partner keys\n\n" + a.String() + "  acme travel\n\t" + b.String() + "\n"
	got, err := ParseKeyFile("keys.txt", []byte(file))
	if err != nil {
		t.Fatalf("ParseKeyFile = %v", err)
	}
	if diff := cmp.Diff([]KeyHash{a, b}, got); diff != "" {
		t.Errorf("ParseKeyFile (-want +got):\n%s", diff)
	}
	ring := keyring(got)
	for key, want := range map[string]bool{"alpha": true, "beta": true, "gamma": false, "": false, a.String(): false} {
		if ring.allows(key) != want {
			t.Errorf("allows(%q) = %v, want %v", key, !want, want)
		}
	}
}

func TestParseKeyFileRefusesPlainKeys(t *testing.T) {
	for _, tc := range []struct {
		in   string
		line int
	}{
		{HashKey("a").String() + "\npk_live_plainkey\n", 2},
		{"sha256:abcd\n", 1},
		{"# only comments\n", 0},
	} {
		_, err := ParseKeyFile("keys.txt", []byte(tc.in))
		var ke *KeyError
		if !errors.As(err, &ke) || ke.Line != tc.line {
			t.Errorf("ParseKeyFile(%q) = %v, want a *KeyError on line %d", tc.in, err, tc.line)
		}
	}
}

func TestParseKeyList(t *testing.T) {
	a, b := HashKey("alpha"), HashKey("beta")
	got, err := ParseKeyList("CATALOGUE_PARTNER_KEYS", a.String()+", "+b.String())
	if err != nil {
		t.Fatalf("ParseKeyList = %v", err)
	}
	if diff := cmp.Diff([]KeyHash{a, b}, got); diff != "" {
		t.Errorf("ParseKeyList (-want +got):\n%s", diff)
	}
	for _, in := range []string{"", " , ", "alpha"} {
		if _, err := ParseKeyList("CATALOGUE_PARTNER_KEYS", in); err == nil {
			t.Errorf("ParseKeyList(%q) = nil error, want one", in)
		}
	}
}

func TestNewKeyUsesTheGivenRandomness(t *testing.T) {
	k1, err := NewKey(bytes.NewReader(bytes.Repeat([]byte{1}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := NewKey(bytes.NewReader(bytes.Repeat([]byte{2}, 32)))
	if k1 == k2 || !strings.HasPrefix(k1, "pk_") || len(k1) != 3+43 {
		t.Errorf("NewKey = %q, %q; want two different pk_ keys of 46 characters", k1, k2)
	}
	if _, err := NewKey(bytes.NewReader(nil)); err == nil {
		t.Errorf("NewKey(empty reader) = nil error, want one")
	}
}
