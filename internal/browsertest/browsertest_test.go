package browsertest_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"

	"github.com/turnledger/turnledger/internal/browsertest"
)

// TestBrowser: a page served on loopback loads, runs its script, is seen in
// Requests, and can be photographed.
func TestBrowser(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<!doctype html><title>t</title><p id="x">static</p><script>document.getElementById("x").textContent = "scripted"; fetch("/ping")</script>`)
		case "/ping":
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer srv.Close()
	b := browsertest.Start(t, browsertest.Options{})
	b.Navigate(t, srv.URL+"/")
	if got := b.Text(t, "#x"); got != "scripted" {
		t.Errorf("text of #x = %q, want scripted", got)
	}
	if sum := browsertest.Eval[int](t, b, "1 + 2"); sum != 3 {
		t.Errorf("Eval(1 + 2) = %d", sum)
	}
	png, err := os.ReadFile(b.Screenshot(t, "page"))
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("screenshot is not a PNG (%v)", err)
	}
	if got := b.Requests(); !slices.Contains(got, "GET "+srv.URL+"/") {
		t.Errorf("Requests() = %v, want the page's GET", got)
	}
}
