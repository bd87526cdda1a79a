package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/turnledger/turnledger/console"
)

// sseFeedAdapter stands in for the SSE feeds that another change adds to
// the API (Accept: text/event-stream on a feed route, id = ledger_seq, data
// = the feed item): it answers such a request for the project feed by
// streaming what the real serve's JSON pages hold, and passes every other
// request to serve unchanged. It lets the console's stream reader be tested
// now; once serve streams itself, the test can point at serve directly.
type sseFeedAdapter struct {
	serve   *url.URL
	proxy   *httputil.ReverseProxy
	streams atomic.Int64 // SSE requests answered
	pages   atomic.Int64 // JSON feed requests passed on
}

func (a *sseFeedAdapter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	isFeed := r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/projection/feed")
	if !isFeed || !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		if isFeed {
			a.pages.Add(1)
		}
		a.proxy.ServeHTTP(w, r)
		return
	}
	a.streams.Add(1)
	after, _ := strconv.ParseUint(r.URL.Query().Get("after_ledger_seq"), 10, 64)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	fmt.Fprint(w, ": connected\n\n")
	rc.Flush()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		u := *a.serve
		u.Path = r.URL.Path
		u.RawQuery = url.Values{"after_ledger_seq": {strconv.FormatUint(after, 10)}, "limit": {"100"}}.Encode()
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, u.String(), nil)
		req.Header = r.Header.Clone()
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		var page struct {
			Items []json.RawMessage `json:"items"`
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		json.Unmarshal(body, &page)
		for _, it := range page.Items {
			var head struct {
				LedgerSeq uint64 `json:"ledger_seq"`
				Type      string `json:"type"`
			}
			json.Unmarshal(it, &head)
			// Split the data over two lines, as a stream may: the reader
			// joins them with a newline, which JSON reads as space.
			data := strings.Replace(string(it), ",", ",\ndata: ", 1)
			fmt.Fprintf(w, "id: %d\r\nevent: %s\r\ndata: %s\r\n\r\n", head.LedgerSeq, head.Type, data)
			after = head.LedgerSeq
		}
		rc.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// TestConsoleFeedOverSSE checks that the live feed reads Server-Sent Events
// when the server offers them: it takes the stream instead of polling, and
// an event appended later arrives over it.
func TestConsoleFeedOverSSE(t *testing.T) {
	dir := t.TempDir()
	base, _ := startServe(t, dir)
	s := newConsoleScenario(t, base, dir)
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	adapter := &sseFeedAdapter{serve: target, proxy: httputil.NewSingleHostReverseProxy(target)}
	front := httptest.NewServer(console.Mount(adapter))
	t.Cleanup(front.Close)

	var reqs consoleRequests
	ctx := consoleBrowser(t, &reqs)
	consoleSignInAdmin(t, ctx, front.URL, strings.TrimPrefix(s.admin.headers["Authorization"], "Bearer "))
	consoleDo(t, ctx, "open the live feed",
		chromedp.Navigate(front.URL+"/console/#/p/demo/feed"),
		consoleSettled(),
		chromedp.WaitVisible(css(`#project-feed[data-mode=stream] li[data-type="turn.claimed"]`)),
	)
	s.admin.call("POST", "/v3r1/projects/demo/management/turns/"+s.other+":stop", map[string]any{
		"requested_by": agentRef("demo", "planner"), "meta": nil, "trace": nil}, 200)
	consoleDo(t, ctx, "see an event arrive over the stream",
		chromedp.WaitVisible(css(`#project-feed li[data-type="turn.stopped"]`)),
	)
	seqs := consoleGet(t, ctx, "read the feed", chromedp.Evaluate[[]int](`[...document.querySelectorAll('#project-feed li')].map(li => +li.dataset.seq)`))
	for i := 1; i < len(seqs); i++ {
		if seqs[i] >= seqs[i-1] {
			t.Fatalf("the feed shows ledger_seq %v: not newest first without repeats", seqs)
		}
	}
	if adapter.streams.Load() == 0 || adapter.pages.Load() != 0 {
		t.Errorf("the feed made %d stream and %d JSON page requests, want streams only", adapter.streams.Load(), adapter.pages.Load())
	}
}
