// Package console serves turnledger's web console: a few plain HTML, CSS and
// JavaScript files embedded in the binary (no build step, no external
// requests), mounted under /console/ by `turnledger serve`.
//
// The console is a client of the public HTTP API and nothing else: it holds
// no server-side state and calls no Go function of the engine, so it can do
// nothing the API would refuse to the credential it signed in with. The
// credential (the admin bearer, or an agent's project, id and token) is kept
// in the browser's sessionStorage, never in a URL or a cookie.
//
// Pages (hash routes, so the server serves one document):
//
//	#/                          projects (admin) or the agent's project
//	#/overview                  the instance's last hour in charts (admin):
//	                            GET /admin/v1/trends drawn as small SVG
//	                            charts of the page's own (no library)
//	#/p/{project}?limit=&pages= stuck work: queued Turns that cannot start and why,
//	                            expired claims awaiting release, stops not yet done,
//	                            projection lag; each list read at most pages pages
//	                            of limit Turns (4 of 500), a note naming every list
//	                            that goes on beyond that
//	#/p/{project}/agents        the agent directory
//	#/p/{project}/agents/{id}   one agent: snapshot, drain/resume, its feed
//	#/p/{project}/turns?…       Turns, newest dispatch first (order=oldest flips
//	                            it), with the filters of projection/turns (state,
//	                            outcome, priority, kind, target, tag, waiting for
//	                            input, stop requested), their priority and tags,
//	                            cursor paging; Stop all and Retry all for the
//	                            filter (bulk-stop, bulk-retry)
//	#/p/{project}/turns/{id}    one Turn: snapshot, tags, schedule (priority,
//	                            not_before, claim_by, deadline, attempts of
//	                            max_attempts, retry_backoff, retry_of), claim
//	                            countdown, context, live feed, lineage tree,
//	                            stop/stop tree/resume, retry of a failed, dead,
//	                            expired, timed_out or stopped Turn, and the
//	                            answer form of a Turn waiting for input
//	#/p/{project}/feed          the live project feed, with pause
//
// Waiting for input: the Turn page shows the prompt, input_by and schema of
// a Turn's awaiting_input and answers it with :provide-input as the signed-in
// credential. A schema that is an object whose properties are strings,
// numbers, integers or booleans (enums as selects, required fields marked)
// becomes a form; any other answer is typed as a JSON object.
//
// Bulk actions: Stop all and Retry all send the list's filter (state,
// outcome, kind, target, tag, waiting for input) with limit 100; a list also
// filtered by priority or stop requested offers neither, since the API's
// bulk filter has no such fields and would match more than the list shows.
// The confirmation counts the matching Turns of the page shown; the answer
// says how many were stopped or retried and, when more match, offers to go
// on. The API wants an existing agent in requested_by: an agent acts as
// itself (it needs the management grant); the admin names the requester of
// the first Turn of the page, and the confirmation says so.
package console

import (
	"embed"
	"io"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var files embed.FS

// Prefix is the path the console is served under.
const Prefix = "/console/"

// securityHeaders are sent with every file: the page may load only its own
// files and call only its own origin, and may not be framed.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	"X-Frame-Options":        "DENY",
	"Cache-Control":          "no-cache",
}

// Handler serves the console's files under Prefix: GET and HEAD only,
// /console (without the slash) redirects to /console/, anything else under
// the prefix that is not a file is 404.
func Handler() http.Handler {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	fileServer := http.StripPrefix(strings.TrimSuffix(Prefix, "/"), http.FileServer(http.FS(sub)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		rel := strings.TrimPrefix(r.URL.Path, Prefix)
		if rel != "" {
			// No directory listings: only files that exist are served.
			if st, err := fs.Stat(sub, rel); err != nil || st.IsDir() {
				http.NotFound(w, r)
				return
			}
		}
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		fileServer.ServeHTTP(w, r)
	})
}

// rootText is the answer to GET /: where a person who opened the bare
// address goes next.
const rootText = "turnledger: the agent work coordination API.\n" +
	"The console: " + Prefix + "\n" +
	"The API, described in OpenAPI: /openapi.json\n"

// Mount returns a handler that serves the console under Prefix, answers
// GET / with a line pointing at the console and the API description, and
// sends every other request to api.
func Mount(api http.Handler) http.Handler {
	c := Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == strings.TrimSuffix(Prefix, "/") || strings.HasPrefix(r.URL.Path, Prefix):
			c.ServeHTTP(w, r)
		case r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			for k, v := range securityHeaders {
				w.Header().Set(k, v)
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			io.WriteString(w, rootText)
		default:
			api.ServeHTTP(w, r)
		}
	})
}
