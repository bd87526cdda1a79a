package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// conn is the http.RoundTripper of one lifecycle worker's client: HTTP/1.1
// on a keep-alive connection of its own, the request written in one piece
// (Request.Write) and the answer read with net/http's own parser
// (http.ReadResponse), as load generators such as wrk do. net/http's
// Transport spends two goroutines per connection, a pool and two hand-overs
// per request, and the load generator shares the machine's cores with the
// server it measures: a worker that owns its connection costs less CPU
// (--net-http drives through one shared Transport instead). A conn is for
// one request at a time; a request that fails closes the connection, and
// the next dials again.
type conn struct {
	host string // host:port to dial
	c    net.Conn
	br   *bufio.Reader
	req  bytes.Buffer
	body []byte // the last answer's body; reused by the next (see RoundTrip)
}

// newConn returns a conn to base (an http:// URL without a path), or nil
// for any other URL (https: the caller keeps net/http's Transport).
func newConn(base string) *conn {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Path != "" && u.Path != "/" {
		return nil
	}
	return &conn{host: u.Host}
}

// RoundTrip sends req on the connection and reads its answer whole. Any
// failure closes the connection: what is left of an answer on it cannot be
// told from the next. An answer's body of a known length is read into a
// buffer the connection keeps and reuses for the next answer: the worker's
// client reads each body whole before it sends its next request.
func (c *conn) RoundTrip(req *http.Request) (_ *http.Response, err error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	if req.URL.Host != c.host {
		return nil, errors.New("bench: a worker's connection goes to " + c.host + " only")
	}
	for k, vs := range req.Header {
		for _, v := range vs {
			if strings.ContainsAny(k+v, "\r\n") {
				return nil, fmt.Errorf("bench: header %q: a line break", k)
			}
		}
	}
	c.req.Reset()
	if err := req.Write(&c.req); err != nil {
		return nil, err
	}
	if c.c == nil {
		var d net.Dialer
		nc, err := d.DialContext(req.Context(), "tcp", c.host)
		if err != nil {
			return nil, err
		}
		c.c, c.br = nc, bufio.NewReaderSize(nc, 16<<10)
	}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	if dl, ok := req.Context().Deadline(); ok {
		c.c.SetDeadline(dl.Add(timeoutGrace))
	}
	if _, err := c.c.Write(c.req.Bytes()); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(c.br, req)
	if err != nil {
		return nil, err
	}
	var body []byte
	if n := resp.ContentLength; n >= 0 && n <= maxKeptBody {
		if int64(cap(c.body)) < n {
			c.body = make([]byte, n)
		}
		body = c.body[:n]
		_, err = io.ReadFull(resp.Body, body)
	} else {
		body, err = io.ReadAll(resp.Body)
	}
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if resp.Close {
		c.close()
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// close closes the connection, if one is open.
func (c *conn) close() {
	if c.c != nil {
		c.c.Close()
		c.c = nil
	}
}

// maxKeptBody is the largest answer's body a conn reads into its kept
// buffer; larger ones (a feed page of big payloads) get one of their own.
const maxKeptBody = 1 << 20

// timeoutGrace is how long past the run's end a request may still take.
const timeoutGrace = 30 * time.Second
