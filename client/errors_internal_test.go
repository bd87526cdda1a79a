package client

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfterIsRead(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"":                              0,
		"1":                             time.Second,
		"5":                             5 * time.Second,
		"0":                             0,
		"-3":                            0,
		"soon":                          0,
		"1.5":                           0,
		"Wed, 21 Oct 2015 07:28:00 GMT": 0, // a date gone by
	} {
		err := errorFrom(503, http.Header{"Retry-After": {v}}, []byte(`{"error":"ServiceUnavailableError","message":"m"}`))
		if got := err.(*Error).RetryAfter; got != want {
			t.Errorf("Retry-After %q: RetryAfter = %v, want %v", v, got, want)
		}
	}
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	err := errorFrom(503, http.Header{"Retry-After": {future}}, nil).(*Error)
	if err.RetryAfter < 59*time.Minute || err.RetryAfter > time.Hour {
		t.Errorf("Retry-After %q: RetryAfter = %v, want about 1h", future, err.RetryAfter)
	}
	if err.Status != 503 || err.Name != "Service Unavailable" {
		t.Errorf("errorFrom(503, no body) = %+v, want status 503 named by its status text", err)
	}
	if got := pause(err, time.Second); got != err.RetryAfter {
		t.Errorf("pause(Retry-After %v, 1s) = %v, want the Retry-After", err.RetryAfter, got)
	}
	if got := pause(&Error{Status: 503}, time.Second); got != time.Second {
		t.Errorf("pause(no Retry-After, 1s) = %v, want 1s", got)
	}
}
