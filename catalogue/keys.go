package catalogue

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
)

// KeyHash is the SHA-256 of a partner key. Only hashes are kept: the server
// never holds a partner key, so its key list leaks nothing usable.
type KeyHash [sha256.Size]byte

// HashKey returns the hash of a partner key.
func HashKey(key string) KeyHash { return sha256.Sum256([]byte(key)) }

// String is the form kept in key files: "sha256:" and 64 hex digits.
func (h KeyHash) String() string { return "sha256:" + hex.EncodeToString(h[:]) }

// KeyError is a key list that cannot be used; Line is the line at fault
// (for the environment variable, the position of the entry, 1-based).
type KeyError struct {
	Source string
	Line   int
	Msg    string
}

func (e *KeyError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.Source, e.Msg)
	}
	return fmt.Sprintf("%s: line %d: %s", e.Source, e.Line, e.Msg)
}

// ParseKeyHash reads one "sha256:<64 hex digits>" entry.
func ParseKeyHash(s string) (KeyHash, error) {
	var h KeyHash
	hexPart, ok := strings.CutPrefix(s, "sha256:")
	if !ok {
		return h, fmt.Errorf("not a key hash: want sha256:<64 hex digits> (make one with 'turnledger catalogue hash-key'; plain keys are not accepted here)")
	}
	b, err := hex.DecodeString(hexPart)
	if err != nil || len(b) != sha256.Size {
		return h, fmt.Errorf("not a key hash: want sha256: and 64 hex digits")
	}
	copy(h[:], b)
	return h, nil
}

// ParseKeyFile reads a key file: one hash per line ("sha256:<hex>"),
// optionally followed by blanks and a label (the partner's name); blank lines
// and lines starting with # are ignored.
func ParseKeyFile(source string, data []byte) ([]KeyHash, error) {
	var out []KeyHash
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		field, _, _ := strings.Cut(strings.ReplaceAll(line, "\t", " "), " ")
		h, err := ParseKeyHash(field)
		if err != nil {
			return nil, &KeyError{Source: source, Line: n, Msg: err.Error()}
		}
		out = append(out, h)
	}
	if err := sc.Err(); err != nil {
		return nil, &KeyError{Source: source, Msg: err.Error()}
	}
	if len(out) == 0 {
		return nil, &KeyError{Source: source, Msg: "no key hashes"}
	}
	return out, nil
}

// ParseKeyList reads the environment form: hashes separated by commas or
// blanks.
func ParseKeyList(source, list string) ([]KeyHash, error) {
	var out []KeyHash
	for i, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
		h, err := ParseKeyHash(f)
		if err != nil {
			return nil, &KeyError{Source: source, Msg: fmt.Sprintf("entry %d: %v", i+1, err)}
		}
		out = append(out, h)
	}
	if len(out) == 0 {
		return nil, &KeyError{Source: source, Msg: "no key hashes"}
	}
	return out, nil
}

// NewKey draws a new partner key (32 random bytes, base64url) from rand.
func NewKey(rand io.Reader) (string, error) {
	b := make([]byte, 32)
	if _, err := io.ReadFull(rand, b); err != nil {
		return "", fmt.Errorf("draw a key: %w", err)
	}
	return "pk_" + base64.RawURLEncoding.EncodeToString(b), nil
}

// keyring answers whether a presented key is one of the partners'.
type keyring []KeyHash

// allows hashes the key and compares it with every stored hash in constant
// time; it does not stop at the first match, so the time taken says nothing
// about which entry, if any, matched.
func (k keyring) allows(key string) bool {
	h := HashKey(key)
	match := 0
	for i := range k {
		match |= subtle.ConstantTimeCompare(h[:], k[i][:])
	}
	return match == 1
}
