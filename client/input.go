package client

import (
	"context"
	"fmt"
	"net/url"
	"strings"
)

// ProvideInputWithToken answers a Turn's input wait with the input token
// alone: no agent or admin credential, so a person's browser, a chat bot or
// another system that received the input URL and token of a
// SuspendTurnForInput can answer. inputURL is that InputURL (the absolute
// URL of the Turn's :provide-input); input is encoded as a JSON object.
// The request carries only Authorization: Bearer <token>. opts may set the
// HTTP client and the User-Agent; any credential in them is not sent.
//
// The token works once: a second answer, or an answer to a Turn no longer
// awaiting input, is an *Error with status 409 (ErrConflict); a wrong token
// is a 401. With a ctx from WithIdempotencyKey the call is safe to retry.
func ProvideInputWithToken(ctx context.Context, inputURL, token string, input any, opts ...Option) (*Turn, error) {
	u, err := url.Parse(inputURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("client: input URL %q must be an absolute http or https URL without a query", inputURL)
	}
	path := u.EscapedPath()
	i := strings.Index(path, "/v3r1/projects/")
	if i < 0 || !strings.HasSuffix(path, ":provide-input") || !strings.Contains(path[i:], "/turns/") {
		return nil, fmt.Errorf("client: input URL %q is not a Turn's :provide-input URL", inputURL)
	}
	if token == "" {
		return nil, fmt.Errorf("client: an input token is needed")
	}
	c, err := New(u.Scheme+"://"+u.Host+path[:i], opts...)
	if err != nil {
		return nil, err
	}
	c.inputToken = token
	var out Turn
	_, err = c.do(ctx, "POST", path[i:], nil, map[string]any{"input": input}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}
