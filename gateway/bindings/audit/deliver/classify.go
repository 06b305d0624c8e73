package deliver

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Verdict is what one answer of the repository means for a record.
type Verdict int

const (
	// Delivered: 2xx. The record is acknowledged.
	Delivered Verdict = iota
	// Rejected: a 4xx that no retry changes (anything but 401, 403, 408 and 429).
	// The record goes to quarantine.
	Rejected
	// RetryAuth: 401 or 403, a credential fault. Retried with backoff, never
	// quarantined: the record is fine, the gateway's credentials are not.
	RetryAuth
	// Retry: 5xx, 408, 429, a 3xx (redirects are not followed), a timeout, a refused
	// or broken connection. Retried with backoff, honouring Retry-After.
	Retry
)

func (v Verdict) String() string {
	switch v {
	case Delivered:
		return "delivered"
	case Rejected:
		return "rejected"
	case RetryAuth:
		return "retry-auth"
	default:
		return "retry"
	}
}

// Classify is the verdict of an HTTP status (docs/audit-spool.md, "Delivery").
func Classify(status int) Verdict {
	switch {
	case status >= 200 && status < 300:
		return Delivered
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return RetryAuth
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests:
		return Retry
	case status >= 400 && status < 500:
		return Rejected
	default:
		return Retry
	}
}

// ParseRetryAfter reads a Retry-After value, delay-seconds or an HTTP-date, as a wait
// from now, bounded to [0, limit]. ok is false for an absent or unreadable value.
func ParseRetryAfter(v string, now time.Time, limit time.Duration) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if n, err := strconv.ParseUint(v, 10, 63); err == nil {
		if n > uint64(limit/time.Second) {
			return limit, true
		}
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	} else {
		return 0, false
	}
	return min(max(d, 0), limit), true
}

// Backoff is the wait before retry number attempt (1 for the first retry): full
// jitter over a capped exponential, r·min(limit, base·2^(attempt-1)) with r in [0,1).
func Backoff(attempt int, base, limit time.Duration, r float64) time.Duration {
	ceil := base
	for i := 1; i < attempt && ceil < limit; i++ {
		ceil *= 2
	}
	ceil = min(ceil, limit)
	return time.Duration(r * float64(ceil))
}
