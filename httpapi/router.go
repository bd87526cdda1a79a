package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"
)

// verbRouter routes paths whose last segment may end in a custom verb, such
// as /turns:dispatch or /turns/{turn_id}:resume. httprouter cannot register
// them as written (":dispatch" reads as a parameter and clashes with
// "/turns/:turn_id"), so the verb is split off the last segment first and
// each verb gets a tree of its own. Ids never contain ':' (they are checked
// against kernel.ValidID), so the split is unambiguous.
type verbRouter struct {
	trees    map[string]*httprouter.Router
	notFound http.Handler
	notAllow http.Handler
	panics   func(http.ResponseWriter, *http.Request, any)
}

func newVerbRouter(notFound, notAllowed http.Handler, panics func(http.ResponseWriter, *http.Request, any)) *verbRouter {
	return &verbRouter{trees: map[string]*httprouter.Router{}, notFound: notFound, notAllow: notAllowed, panics: panics}
}

// splitVerb splits "/a/b:verb" into "/a/b" and "verb".
func splitVerb(path string) (string, string) {
	i := strings.LastIndexByte(path, '/')
	j := strings.IndexByte(path[i+1:], ':')
	if j < 0 {
		return path, ""
	}
	return path[:i+1+j], path[i+1+j+1:]
}

// splitPatternVerb is splitVerb for a pattern, whose last segment may itself
// be a parameter: "/turns/:turn_id:resume" has the verb "resume".
func splitPatternVerb(pattern string) (string, string) {
	i := strings.LastIndexByte(pattern, '/') + 1
	start := 0
	if strings.HasPrefix(pattern[i:], ":") {
		start = 1
	}
	j := strings.IndexByte(pattern[i+start:], ':')
	if j < 0 {
		return pattern, ""
	}
	return pattern[:i+start+j], pattern[i+start+j+1:]
}

// Handle registers h for method and a pattern in httprouter syntax, with an
// optional ":verb" at the end of the last segment.
func (v *verbRouter) Handle(method, pattern string, h httprouter.Handle) {
	path, verb := splitPatternVerb(pattern)
	t := v.trees[verb]
	if t == nil {
		t = httprouter.New()
		t.RedirectTrailingSlash = false
		t.RedirectFixedPath = false
		t.HandleMethodNotAllowed = true
		t.HandleOPTIONS = false // an OPTIONS request gets the one error writer's 405, like any other method
		t.NotFound = v.notFound
		t.MethodNotAllowed = v.notAllow
		t.PanicHandler = v.panics
		v.trees[verb] = t
	}
	t.Handle(method, path, withPattern(pattern, h))
}

func (v *verbRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(context.WithValue(r.Context(), pathKey{}, r.URL.Path))
	// An escaped slash would be read as a separator once decoded: no route
	// has one.
	if strings.Contains(strings.ToLower(r.URL.EscapedPath()), "%2f") {
		v.notFound.ServeHTTP(w, r)
		return
	}
	path, verb := splitVerb(r.URL.Path)
	t := v.trees[verb]
	if t == nil {
		v.notFound.ServeHTTP(w, r)
		return
	}
	if verb != "" {
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.Path, u.RawPath = path, ""
		r2.URL = &u
		r = r2
	}
	t.ServeHTTP(w, r)
}

type pathKey struct{}

// requestPath is the path the client asked for, before the verb was split
// off: what error messages name.
func requestPath(r *http.Request) string {
	if p, ok := r.Context().Value(pathKey{}).(string); ok {
		return p
	}
	return r.URL.Path
}
