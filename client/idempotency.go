package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"time"
)

// IdempotencyHeader is the request header that makes a mutating request safe
// to retry: the server answers a retry with the same key and body with the
// first request's answer (claim tokens, credential tokens and join codes
// included) instead of deciding again.
const IdempotencyHeader = "Idempotency-Key"

type idemKey struct{}

// WithIdempotencyKey returns ctx carrying key: every mutating method (POST,
// PUT) called with it sends the key as the Idempotency-Key header. Reuse the
// key, with the same arguments, only to retry a call whose answer was lost
// (a network error or a 503); a new call needs a new key (NewIdempotencyKey).
// GET methods ignore it.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idemKey{}, key)
}

// NewIdempotencyKey returns a fresh random key (32 hex digits).
func NewIdempotencyKey() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// setIdempotencyKey adds ctx's key to a mutating request.
func setIdempotencyKey(ctx context.Context, req *http.Request) {
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		return
	}
	if k, ok := ctx.Value(idemKey{}).(string); ok && k != "" {
		req.Header.Set(IdempotencyHeader, k)
	}
}

// Retryable reports whether a call that failed with err may be retried with
// the same Idempotency-Key: the answer was lost (a network error), or the
// service was unavailable or shedding load (502, 503, 504, 429). Any other
// refusal is an answer, and a retry would get it again.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ce *Error
	if !errors.As(err, &ce) {
		return true // no answer from the service
	}
	switch ce.Status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retryKeyed calls op with ctx carrying one idempotency key, again after
// delay (doubling up to 5s; longer when the service asks with Retry-After)
// while it fails with a Retryable error, at most attempts times (0: until ctx
// ends).
func retryKeyed(ctx context.Context, attempts int, delay time.Duration, op func(ctx context.Context) error) error {
	ctx = WithIdempotencyKey(ctx, NewIdempotencyKey())
	for n := 1; ; n++ {
		err := op(ctx)
		if !Retryable(err) || (attempts > 0 && n >= attempts) {
			return err
		}
		t := time.NewTimer(pause(err, delay))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// pause is how long to wait before trying a failed call again: delay, or the
// service's Retry-After when it asks for longer.
func pause(err error, delay time.Duration) time.Duration {
	var ce *Error
	if errors.As(err, &ce) && ce.RetryAfter > delay {
		return ce.RetryAfter
	}
	return delay
}
