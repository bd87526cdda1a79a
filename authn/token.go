package authn

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// MaxNumericDate is the latest exp, iat or nbf a token may carry:
// 9999-12-31T23:59:59Z. Later values (and negative ones) are refused, so no
// conversion to a 64-bit count of seconds or nanoseconds can overflow or
// saturate.
const MaxNumericDate = 253402300799

// The header parameters and claims this package (or the JWT library) reads.
// encoding/json matches object keys to struct fields case-insensitively
// (with Unicode simple folding: "ſub" matches "sub"), so a key that folds to
// one of these names without being it exactly is refused; read from the
// exact keys only.
var (
	headerNames = []string{"alg", "kid", "typ", "crit", "cty", "jku", "jwk", "x5u", "x5c", "x5t", "x5t#S256", "b64", "zip", "enc"}
	claimNames  = []string{"iss", "sub", "aud", "exp", "nbf", "iat", "jti", "tid", "oid", "id", "email", "preferred_username", "upn", "name"}
	dateClaims  = []string{"exp", "iat", "nbf"}
)

// checkTokenJSON refuses a compact JWS whose header or payload is not one
// JSON object with each key once, whose registered or spec names appear in
// another letter case, or whose exp, iat or nbf is anything but a JSON
// number from 0 to MaxNumericDate. It runs before the signature is checked,
// so it reads nothing but the shape; the JWT library then decodes the same
// bytes.
func checkTokenJSON(token string) *Error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return unauthorized("token is malformed")
	}
	for i, what := range []string{"header", "payload"} {
		b, err := base64.RawURLEncoding.Strict().DecodeString(parts[i])
		if err != nil {
			return unauthorized("token is malformed")
		}
		names, dates := headerNames, []string(nil)
		if i == 1 {
			names, dates = claimNames, dateClaims
		}
		if err := checkObject(b, names, dates); err != nil {
			return unauthorized("token " + what + " " + err.Error())
		}
	}
	return nil
}

func checkObject(b []byte, names, dates []string) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("is not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return errors.New("is not valid JSON")
		}
		key, _ := t.(string)
		if seen[key] {
			return fmt.Errorf("holds %q more than once", key)
		}
		seen[key] = true
		for _, n := range names {
			if key != n && strings.EqualFold(key, n) {
				return fmt.Errorf("holds %q, which differs from %q only in letter case", key, n)
			}
		}
		if slices.Contains(dates, key) {
			v, err := dec.Token()
			if err != nil {
				return errors.New("is not valid JSON")
			}
			if err := checkNumericDate(v); err != nil {
				return fmt.Errorf("claim %s %v", key, err)
			}
			continue
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return errors.New("is not valid JSON")
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return errors.New("is not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("has data after the JSON object")
	}
	return nil
}

// checkNumericDate: RFC 7519's NumericDate is a JSON number; this package
// also bounds it to [0, MaxNumericDate].
func checkNumericDate(v json.Token) error {
	n, ok := v.(json.Number)
	if !ok {
		return errors.New("must be a JSON number of seconds (NumericDate)")
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f < 0 || f > MaxNumericDate {
		return fmt.Errorf("must be between 0 and %d (9999-12-31T23:59:59Z)", MaxNumericDate)
	}
	return nil
}
