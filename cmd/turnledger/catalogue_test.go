package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/catalogue"
	"github.com/turnledger/turnledger/internal/checkfor"
)

var listeningLine = regexp.MustCompile(`listening on (http://[0-9.:]+)/`)

// startCatalogue runs `turnledger catalogue` with args on a random loopback
// port and returns its base URL; the server stops at the end of the test.
func startCatalogue(t *testing.T, args ...string) string {
	t.Helper()
	base, _ := startCatalogueLogged(t, args...)
	return base
}

// startCatalogueLogged is startCatalogue that also returns what the server
// writes to stderr.
func startCatalogueLogged(t *testing.T, args ...string) (string, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- runCatalogue(ctx, append([]string{"--addr", "127.0.0.1:0"}, args...), io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("catalogue server returned %v, want nil after cancel", err)
		}
	})
	var base string
	checkfor.Until(t, 5*time.Second, "the catalogue server to listen", func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("catalogue exited early: %v (stderr %q)", err, stderr.String())
		default:
		}
		if m := listeningLine.FindStringSubmatch(stderr.String()); m != nil {
			base = m[1]
			return true
		}
		return false
	})
	return base, stderr
}

func fetchListing(t *testing.T, url, key string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Partner-Auth", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

func TestCatalogueServesAUserFileWithKeysFromAFile(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "catalogue.json")
	if err := os.WriteFile(data, []byte(`{
  "cities": [{"code": "OSAKA", "names": {"EN": "Osaka"}}],
  "categories": [{"id": "c1", "names": {"EN": "Tickets"}}],
  "subcategories": [{"id": "s1", "cityCode": "OSAKA", "categoryId": "c1",
    "names": {"EN": "Castles", "DE": "Burgen"}, "paths": {"EN": "/osaka/castles/", "DE": "/de/osaka/burgen/"}}]
}`), 0o600); err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("# partners\n"+catalogue.HashKey("k-osaka").String()+" osaka partner\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startCatalogue(t, "--data", data, "--keys", keys, "--base-url", "https://tickets.example.test")

	status, body := fetchListing(t, base+catalogue.Path+"?cityCode=OSAKA&languageCode=DE", "k-osaka")
	var resp catalogue.Response
	if err := json.Unmarshal(body, &resp); status != 200 || err != nil || len(resp.SubCategories) != 1 {
		t.Fatalf("GET OSAKA DE = %d %s, want 200 and one subcategory", status, body)
	}
	if got, want := resp.SubCategories[0].CanonicalURL, "https://tickets.example.test/de/osaka/burgen/"; got != want {
		t.Errorf("canonicalUrl = %q, want %q", got, want)
	}
	if status, _ := fetchListing(t, base+catalogue.Path+"?cityCode=PARIS", "k-osaka"); status != 404 {
		t.Errorf("GET PARIS (not in the user's file) = %d, want 404", status)
	}
	if status, _ := fetchListing(t, base+catalogue.Path+"?cityCode=OSAKA", "k-other"); status != 401 {
		t.Errorf("GET with an unknown key = %d, want 401", status)
	}
}

func TestCatalogueTakesKeysFromTheEnvironment(t *testing.T) {
	t.Setenv(catalogueKeysEnv, catalogue.HashKey("k1").String()+","+catalogue.HashKey("k2").String())
	base := startCatalogue(t)
	for _, key := range []string{"k1", "k2"} {
		status, body := fetchListing(t, base+catalogue.Path+"?cityCode=PARIS", key)
		var resp catalogue.Response
		if err := json.Unmarshal(body, &resp); status != 200 || err != nil || len(resp.SubCategories) == 0 {
			t.Errorf("GET PARIS with key %s = %d %s, want 200 and the sample's Paris", key, status, body)
			continue
		}
		if !strings.HasPrefix(resp.SubCategories[0].CanonicalURL, base+"/") {
			t.Errorf("canonicalUrl = %q, want it on the server's own address %s by default", resp.SubCategories[0].CanonicalURL, base)
		}
	}
}

func TestCatalogueRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.json")
	os.WriteFile(broken, []byte("{\n  \"cities\": [\n    {\"code\": \"x\", \"names\": {\"EN\": \"X\"}}\n  ]\n}\n"), 0o600)
	plain := filepath.Join(dir, "keys")
	os.WriteFile(plain, []byte("pk_plain_key\n"), 0o600)
	good := filepath.Join(dir, "good-keys")
	os.WriteFile(good, []byte(catalogue.HashKey("k").String()+"\n"), 0o600)
	t.Setenv(catalogueKeysEnv, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--keys", good, "--data", broken}, "turnledger catalogue: " + broken + ": catalogue data: line 3: city code \"x\" must be upper-case letters, digits and _ (e.g. NEW_YORK)\n"},
		{[]string{"--keys", plain}, "turnledger catalogue: " + plain + ": line 1: not a key hash: want sha256:<64 hex digits> (make one with 'turnledger catalogue hash-key'; plain keys are not accepted here)\n"},
		{nil, "turnledger catalogue: no partner keys: give --keys FILE or set CATALOGUE_PARTNER_KEYS (make hashes with 'turnledger catalogue hash-key')\n"},
		{[]string{"--keys", good, "--base-url", "example.com"}, "turnledger catalogue: base URL \"example.com\" must start with http:// or https://\n"},
	} {
		code, _, stderr := runTurnledger(t, append([]string{"catalogue", "--addr", "127.0.0.1:0"}, tc.args...)...)
		if code != 1 || stderr != tc.want {
			t.Errorf("catalogue %v = exit %d, stderr %q; want exit 1, %q", tc.args, code, stderr, tc.want)
		}
	}
}

func TestCatalogueHashKeyReadsStdin(t *testing.T) {
	old := catalogueStdin
	t.Cleanup(func() { catalogueStdin = old })
	catalogueStdin = strings.NewReader("abc\n")
	code, out, _ := runTurnledger(t, "catalogue", "hash-key", "--label", "acme")
	want := "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  acme\n"
	if code != 0 || out != want {
		t.Errorf("catalogue hash-key < abc = %d %q, want 0 %q", code, out, want)
	}
	catalogueStdin = strings.NewReader("")
	if code, _, _ := runTurnledger(t, "catalogue", "hash-key"); code != 2 {
		t.Errorf("catalogue hash-key < empty = exit %d, want 2", code)
	}
}

func TestCatalogueNewKeyPrintsAKeyAndItsHash(t *testing.T) {
	code, out, _ := runTurnledger(t, "catalogue", "new-key")
	var key, hash string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if v, ok := strings.CutPrefix(line, "key:  "); ok {
			key = v
		}
		if v, ok := strings.CutPrefix(line, "hash: "); ok {
			hash = v
		}
	}
	if code != 0 || key == "" || hash != catalogue.HashKey(key).String() {
		t.Errorf("catalogue new-key = %d %q, want a key and its hash", code, out)
	}
}

func TestCatalogueHelpPrintsTheFlags(t *testing.T) {
	code, stdout, _ := runTurnledger(t, "catalogue", "--help")
	for _, flag := range []string{"-addr", "-data", "-keys", "-base-url", catalogueKeysEnv} {
		if !strings.Contains(stdout, flag) {
			t.Errorf("catalogue --help does not mention %s:\n%s", flag, stdout)
		}
	}
	if code != 0 {
		t.Errorf("catalogue --help exit = %d, want 0", code)
	}
}

func TestCatalogueSamplePrintsAUsableFile(t *testing.T) {
	code, out, _ := runTurnledger(t, "catalogue", "sample")
	c, err := catalogue.Parse([]byte(out))
	if code != 0 || err != nil || len(c.Cities) != 7 {
		t.Errorf("catalogue sample = exit %d, Parse error %v; want 0 and a catalogue of 7 cities", code, err)
	}
}

// TestCatalogueTakesTheLoggerFlags: the catalogue writes one line per
// request (method, route, status, never the partner key or the query) in the
// format and from the level its flags say, as serve does, and warns when it
// is told to listen beyond loopback.
func TestCatalogueTakesTheLoggerFlags(t *testing.T) {
	t.Setenv(catalogueKeysEnv, catalogue.HashKey("k-secret-partner-key").String())
	base, stderr := startCatalogueLogged(t, "--log-format", "json")
	fetchListing(t, base+catalogue.Path+"?cityCode=PARIS&secret_query=never-logged", "k-secret-partner-key")
	fetchListing(t, base+catalogue.Path+"?cityCode=PARIS", "k-wrong-partner-key")
	fetchListing(t, base+"/no/such/path", "k-secret-partner-key")
	got := requestLines(t, stderr, 3)
	want := []requestLine{
		{"INFO", "request", "GET", catalogue.Path, 200, 0, ""},
		{"INFO", "request", "GET", catalogue.Path, 401, 0, ""},
		{"INFO", "request", "GET", "(no route)", 404, 0, ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("catalogue --log-format json request lines (-want +got):\n%s\n%s", diff, stderr.String())
	}
	for _, secret := range []string{"k-secret-partner-key", "k-wrong-partner-key", "never-logged"} {
		if strings.Contains(stderr.String(), secret) {
			t.Errorf("the catalogue's log holds %q:\n%s", secret, stderr.String())
		}
	}

	base, stderr = startCatalogueLogged(t, "--log-level", "warn")
	// The second request is served on the same connection only after the
	// first one's handler, its log line included, has returned.
	fetchListing(t, base+catalogue.Path+"?cityCode=PARIS", "k-secret-partner-key")
	fetchListing(t, base+catalogue.Path+"?cityCode=PARIS", "k-secret-partner-key")
	if strings.Contains(stderr.String(), "msg=request") || strings.Contains(stderr.String(), "WARN") {
		t.Errorf("catalogue --log-level warn on loopback logged:\n%s", stderr.String())
	}

	for _, args := range [][]string{{"--log-format", "xml"}, {"--log-level", "loud"}} {
		code, _, errOut := runTurnledger(t, append([]string{"catalogue", "--addr", "127.0.0.1:0"}, args...)...)
		if code != 2 || !strings.Contains(errOut, args[0]+" must be") {
			t.Errorf("catalogue %v = exit %d, stderr %q; want 2 naming %s", args, code, errOut, args[0])
		}
	}

	// An address of the documentation ranges that is no address of this
	// machine: the listen fails after the warning, so the test listens on
	// nothing beyond loopback.
	addr := net.JoinHostPort(notThisMachine(t), "0")
	code, _, errOut := runTurnledger(t, "catalogue", "--addr", addr)
	if code != 1 || !strings.Contains(errOut, `level=WARN msg="listening beyond loopback`) || !strings.Contains(errOut, "addr="+addr) {
		t.Errorf("catalogue --addr %s = exit %d, stderr %q; want exit 1 after a warning about listening beyond loopback", addr, code, errOut)
	}
}

// notThisMachine returns an IPv4 address of the documentation ranges (RFC
// 5737) that no interface of this machine has.
func notThisMachine(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, candidate := range []string{"192.0.2.7", "198.51.100.7", "203.0.113.7", "192.0.2.201", "198.51.100.201", "203.0.113.201"} {
		ip, mine := net.ParseIP(candidate), false
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				mine = true
			}
		}
		if !mine {
			return candidate
		}
	}
	t.Fatalf("every candidate address is one of this machine's: %v", addrs)
	return ""
}

// TestCatalogueStopsWithAClientsSpareConnection: a connection a client
// opened and sent nothing on (a spare dial) does not hold the stop up:
// net/http counts it busy for five seconds, the stop's grace period, and
// the server exited with "context deadline exceeded" (startCatalogue's
// clean-up checks the server returned nil once cancelled).
func TestCatalogueStopsWithAClientsSpareConnection(t *testing.T) {
	var spare net.Conn
	t.Cleanup(func() { spare.Close() }) // after the server's stop: clean-ups run last first
	t.Setenv(catalogueKeysEnv, catalogue.HashKey("k1").String())
	base := startCatalogue(t)
	var err error
	if spare, err = net.Dial("tcp", strings.TrimPrefix(base, "http://")); err != nil {
		t.Fatal(err)
	}
	// Connections are accepted in order: once a later one is answered, the
	// spare one is the server's.
	if status, body := fetchListing(t, base+catalogue.Path+"?cityCode=PARIS", "k1"); status != 200 {
		t.Fatalf("GET PARIS = %d %s", status, body)
	}
}
