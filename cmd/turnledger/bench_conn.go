package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// poster sends a POST of the coordination API with a JSON body and decodes
// the answer into out (when not nil); an answer other than 200 is a
// *statusErr.
type poster interface {
	post(ctx context.Context, headers map[string]string, path string, body any, out any) error
}

// conn is a poster of one worker: HTTP/1.1 on a keep-alive connection of
// its own, the request written in one piece and the answer read with
// net/http's own parser (http.ReadResponse), as load generators such as wrk
// do. net/http's Client spends two goroutines per connection, a pool and two
// hand-overs per request: a sixth of the CPU of a lifecycle run on two
// cores, against a twelfth with conn, and the load generator shares those
// cores with the server it measures (bench --net-http drives with the
// Client, as rounds 1 to 3 of issue 18 did). A conn is for one goroutine at
// a time; a request that fails closes the connection, and the next dials
// again.
type conn struct {
	host string // host:port to dial
	c    net.Conn
	br   *bufio.Reader
	req  bytes.Buffer
}

// newConn returns a conn to base (an http:// URL), or nil for any other
// URL (https: the caller keeps net/http).
func newConn(base string) *conn {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Path != "" && u.Path != "/" {
		return nil
	}
	return &conn{host: u.Host}
}

func (c *conn) post(ctx context.Context, headers map[string]string, path string, body any, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	status, rb, err := c.roundTrip(ctx, headers, path, data)
	if err != nil {
		return err
	}
	return readAnswer(status, rb, out)
}

// roundTrip sends one POST and reads its answer. Any failure closes the
// connection: what is left of an answer on it cannot be told from the next.
func (c *conn) roundTrip(ctx context.Context, headers map[string]string, path string, data []byte) (status int, body []byte, err error) {
	b := &c.req
	b.Reset()
	b.WriteString("POST ")
	b.WriteString(path)
	b.WriteString(" HTTP/1.1\r\nHost: ")
	b.WriteString(c.host)
	b.WriteString("\r\nContent-Type: application/json\r\nContent-Length: ")
	b.WriteString(strconv.Itoa(len(data)))
	b.WriteString("\r\n")
	for k, v := range headers {
		if strings.ContainsAny(k+v, "\r\n") {
			return 0, nil, fmt.Errorf("header %q: a line break", k)
		}
		b.WriteString(k)
		b.WriteString(": ")
		b.WriteString(v)
		b.WriteString("\r\n")
	}
	b.WriteString("\r\n")
	b.Write(data)
	if c.c == nil {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", c.host)
		if err != nil {
			return 0, nil, err
		}
		c.c, c.br = nc, bufio.NewReaderSize(nc, 16<<10)
	}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	if dl, ok := ctx.Deadline(); ok {
		c.c.SetDeadline(dl.Add(timeoutGrace))
	}
	if _, err := c.c.Write(b.Bytes()); err != nil {
		return 0, nil, err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return 0, nil, err
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, nil, err
	}
	if resp.Close {
		c.close()
	}
	return resp.StatusCode, body, nil
}

// close closes the connection, if one is open.
func (c *conn) close() {
	if c.c != nil {
		c.c.Close()
		c.c = nil
	}
}

// timeoutGrace is how long past the run's end a request may still take.
const timeoutGrace = 30 * time.Second
