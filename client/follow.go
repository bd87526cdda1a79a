package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Feed names a ledger feed to follow.
type Feed struct {
	path string
}

// ProjectFeedOf is the feed of every event of a project.
func ProjectFeedOf(project string) Feed { return Feed{projectPath(project, "/projection/feed")} }

// TurnFeedOf is the feed of one Turn.
func TurnFeedOf(project, turn string) Feed {
	return Feed{projectPath(project, "/turns/", seg(turn), "/feed")}
}

// AgentFeedOf is the feed of one agent.
func AgentFeedOf(project, agent string) Feed {
	return Feed{projectPath(project, "/agents/", seg(agent), "/feed")}
}

// String is the feed's path.
func (f Feed) String() string { return f.path }

// Follow iterates over the feed's events after ledger_seq after, live,
// through its event stream (Server-Sent Events). When the connection drops
// it reconnects with Last-Event-ID set to the last ledger_seq it yielded, so
// no event is skipped or repeated; it waits a little longer after each
// failed attempt (from 100ms up to 5s, or the server's Retry-After). The iteration ends when ctx ends
// (without an error), when the loop breaks, or with an error that retrying
// cannot mend: an *Error the server answered (401, 403, 404, 422: bad
// credentials, no access, no such Turn or agent, a bad cursor), also when a
// stream already open is ended by the server because access was lost.
func (c *Client) Follow(ctx context.Context, feed Feed, after uint64) iter.Seq2[FeedItem, error] {
	return func(yield func(FeedItem, error) bool) {
		backoff := 100 * time.Millisecond
		for ctx.Err() == nil {
			progressed, err := c.stream(ctx, feed, &after, yield)
			if errors.Is(err, errStopped) || ctx.Err() != nil {
				return
			}
			var ce *Error
			if errors.As(err, &ce) && !retryable(ce.Status) {
				yield(FeedItem{}, err)
				return
			}
			if progressed {
				backoff = 100 * time.Millisecond
			}
			t := time.NewTimer(pause(err, backoff))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(backoff*2, 5*time.Second)
		}
	}
}

// errStopped: the consumer broke out of the loop.
var errStopped = errors.New("client: follow stopped")

func retryable(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout
}

// stream reads one connection's events, advancing *after; it reports
// whether any event came.
func (c *Client) stream(ctx context.Context, feed Feed, after *uint64, yield func(FeedItem, error) bool) (bool, error) {
	q := url.Values{}
	if *after > 0 {
		q.Set("after_ledger_seq", strconv.FormatUint(*after, 10))
	}
	req, err := c.newRequest(ctx, "GET", feed.path, q, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if *after > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(*after, 10))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return false, errorFrom(resp.StatusCode, resp.Header, data)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return false, &Error{Status: resp.StatusCode, Name: "UnexpectedResponse", Message: "the feed answered " + ct + ", not an event stream"}
	}
	progressed := false
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var event, id string
	var data strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return progressed, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if data.Len() == 0 && event == "" {
				continue
			}
			if event == "error" {
				e := &Error{Status: http.StatusOK}
				if json.Unmarshal([]byte(data.String()), e) != nil || e.Name == "" {
					e.Name, e.Message = "StreamError", data.String()
				}
				e.Status = statusOfName(e.Name)
				return progressed, e
			}
			var it FeedItem
			if err := json.Unmarshal([]byte(data.String()), &it); err != nil {
				return progressed, fmt.Errorf("client: decode event %s: %w", id, err)
			}
			if it.LedgerSeq > *after {
				*after = it.LedgerSeq
				progressed = true
				if !yield(it, nil) {
					return progressed, errStopped
				}
			}
			event, id = "", ""
			data.Reset()
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // a comment: heartbeat
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			event = value
		case "id":
			id = value
		case "data":
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
		}
	}
}

// statusOfName is the status a page would have answered with the error
// name (for an error event inside a stream).
func statusOfName(name string) int {
	switch name {
	case "UnauthorizedError":
		return http.StatusUnauthorized
	case "ForbiddenError":
		return http.StatusForbidden
	case "NotFoundError":
		return http.StatusNotFound
	case "ConflictError", "FencingError":
		return http.StatusConflict
	case "InvariantError", "ValidationError":
		return http.StatusUnprocessableEntity
	case "ServiceUnavailableError":
		return http.StatusServiceUnavailable
	case "InternalError":
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}
