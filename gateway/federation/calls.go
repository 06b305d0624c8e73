package federation

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/ferrofed/ferrofed/gateway/dependencies"
)

// caller sends the gateway's requests to members and records what each one observed.
type caller struct {
	client  *http.Client
	tracker *dependencies.Tracker
	log     logr.Logger
}

// exchange is one finished member call: what the gateway saw, and the body it read.
type exchange struct {
	call     Call
	body     []byte
	duration time.Duration
}

// get sends GET url to m within ctx (already carrying the member budget) and reads at
// most maxBody bytes of the answer (a larger answer is Unusable). client is the client's own request context, used
// only to tell a client that left from a member that did not answer.
//
// prefer is the client's Prefer header, sent on (nil for none).
func (c *caller) get(ctx, client context.Context, m *member, url string, maxBody int64, prefer []string) exchange {
	start := time.Now()
	ex := exchange{}
	tctx, sent := traceSent(ctx)
	req, err := http.NewRequestWithContext(tctx, http.MethodGet, url, nil)
	if err != nil {
		// A URL built from a validated registry does not fail to parse; were it to,
		// nothing left the gateway and nothing is recorded.
		ex.call = Call{Broken: true, ClientGone: true}
		return ex
	}
	req.Header.Set("Accept", FHIRJSON)
	if len(prefer) > 0 {
		req.Header["Prefer"] = prefer
	}
	res, err := c.client.Do(req)
	if err == nil {
		ex.call.Status = res.StatusCode
		ex.body, err = readBody(res, maxBody)
		res.Body.Close()
		if err == nil && int64(len(ex.body)) > maxBody {
			ex.body = nil
			ex.call.Unusable = true
		}
	}
	if err != nil {
		ex.body = nil
		ex.call.Broken = true
		ex.call.Expired = errors.Is(ctx.Err(), context.DeadlineExceeded)
		ex.call.ClientGone = errors.Is(client.Err(), context.Canceled)
		ex.call.NotSent = !sent.Load()
	}
	ex.duration = time.Since(start)
	return ex
}

// readBody reads at most max+1 bytes of res's body: one more than a usable answer may
// have, so that a larger one shows. An answer that says its length is read into one
// buffer of that size, not into one grown (and copied) a few times on the way.
func readBody(res *http.Response, max int64) ([]byte, error) {
	r := io.LimitReader(res.Body, max+1)
	n := res.ContentLength
	if n < 0 || n > max {
		return io.ReadAll(r)
	}
	// One byte more than announced, to see the end without growing the buffer.
	buf := make([]byte, 0, n+1)
	for {
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if len(buf) == cap(buf) {
			// Longer than announced (the transport does not let that happen): read the
			// rest as any other answer.
			rest, err := io.ReadAll(r)
			return append(buf, rest...), err
		}
	}
}

// traceSent returns ctx with a trace that reports whether a request sent with it left
// the gateway: a name was looked up, or a connection was sought or reused. A request
// whose budget ran out before any of that never reached the member, and says nothing
// of it.
func traceSent(ctx context.Context) (context.Context, *atomic.Bool) {
	// One allocation for the flag and the trace; the three hooks share it.
	t := new(sentTrace)
	t.trace = httptrace.ClientTrace{
		DNSStart:     func(httptrace.DNSStartInfo) { t.sent.Store(true) },
		ConnectStart: func(string, string) { t.sent.Store(true) },
		GotConn:      func(httptrace.GotConnInfo) { t.sent.Store(true) },
	}
	return httptrace.WithClientTrace(ctx, &t.trace), &t.sent
}

type sentTrace struct {
	sent  atomic.Bool
	trace httptrace.ClientTrace
}

// observe records the state a call observed of m's endpoint, unless the call says
// nothing about the member (the client left first). It returns the call's outcome.
func (c *caller) observe(m *member, call Call) Outcome {
	outcome, state, record := Classify(call)
	if record {
		// A change of state is what an operator wants in the log; the same state
		// again, on every query, is not.
		if prev, changed := c.tracker.ObserveEndpoint(m.endpointID, state); changed {
			c.log.Info("Member endpoint changed state", "member", m.id, "endpoint", m.endpointID, "from", prev, "to", state, "status", call.Status)
		}
	}
	return outcome
}
