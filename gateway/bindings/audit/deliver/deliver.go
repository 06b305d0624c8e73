package deliver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/audit/spool"
)

// Defaults and limits of Options.
const (
	DefaultTimeout          = 5 * time.Second
	DefaultInFlight         = 2
	MaxInFlight             = 4
	MaxBatchEntries         = 50
	MaxBatchBytes           = 1 << 20
	DefaultBackoffBase      = time.Second
	DefaultBackoffMax       = 60 * time.Second
	DefaultMaxResponseBytes = 1 << 20
	// MaxResponseHeaderBytes bounds the head of the repository's answer on the
	// default client (Go's default is 10 MiB).
	MaxResponseHeaderBytes = 64 << 10
	MaxLinger              = time.Second
)

// Options shape one delivery loop. BaseURL is required.
type Options struct {
	// BaseURL is the repository's FHIR base: records go to POST {BaseURL}/AuditEvent,
	// or as batch Bundles to POST {BaseURL}.
	BaseURL string
	// Client sends the requests; default one of its own. Its redirect policy is
	// replaced: a redirect is never followed.
	Client *http.Client
	// Timeout bounds one exchange, answer read included; default 5 s.
	Timeout time.Duration
	// InFlight is how many deliveries may be under way at once, 1..4; default 2.
	InFlight int
	// Batch sends Bundles of type batch instead of one request per record.
	Batch bool
	// BatchEntries and BatchBytes bound a batch; default and maximum 50 entries and
	// 1 MiB of records.
	BatchEntries int
	BatchBytes   int
	// Linger is how long a batch that is not full waits for more records after its
	// first, 0..MaxLinger; default 0: it leaves with what is ready. A longer wait
	// makes fewer, fuller exchanges (and fewer acknowledgements) under load; every
	// record waiting is already stored.
	Linger time.Duration
	// BackoffBase and BackoffMax shape the retry wait: full jitter over
	// min(BackoffMax, BackoffBase·2^(n-1)); default 1 s and 60 s.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// RetryAfterMax bounds a Retry-After; default BackoffMax.
	RetryAfterMax time.Duration
	// MaxResponseBytes caps the answer read; default 1 MiB. A longer answer is cut
	// (its status still counts).
	MaxResponseBytes int64
	// Authorize sets credentials on each request (a bearer token read from its file).
	Authorize func(*http.Request) error
	// Now is the clock, for a Retry-After date; default time.Now.
	Now func() time.Time
	// Seed seeds the jitter; 0 for a random seed.
	Seed uint64
	// Logf, when set, is told of what the loop cannot report otherwise (an Ack or a
	// quarantine write that failed).
	Logf func(format string, args ...any)
	// KeptIsJSON says that the spool's appender appends only well-formed JSON (the
	// trail builds or parses every event it appends), so that a record kept from
	// this process's append (spool.Record.Kept) goes into a batch unchecked. Every
	// other record is checked: one that is not a JSON value could change the
	// batch's shape, and is sent alone instead.
	KeptIsJSON bool
}

func (o *Options) defaults() error {
	u, err := url.Parse(o.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("deliver: BaseURL %q is no http(s) URL", o.BaseURL)
	}
	o.BaseURL = strings.TrimSuffix(o.BaseURL, "/")
	if o.Client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxResponseHeaderBytes = MaxResponseHeaderBytes
		o.Client = &http.Client{Transport: tr}
	} else {
		c := *o.Client
		o.Client = &c
	}
	o.Client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.InFlight == 0 {
		o.InFlight = DefaultInFlight
	}
	if o.BatchEntries == 0 {
		o.BatchEntries = MaxBatchEntries
	}
	if o.BatchBytes == 0 {
		o.BatchBytes = MaxBatchBytes
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = DefaultBackoffBase
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = DefaultBackoffMax
	}
	if o.RetryAfterMax == 0 {
		o.RetryAfterMax = o.BackoffMax
	}
	if o.MaxResponseBytes == 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	switch {
	case o.Timeout < 0:
		return fmt.Errorf("deliver: Timeout %v is negative", o.Timeout)
	case o.InFlight < 1 || o.InFlight > MaxInFlight:
		return fmt.Errorf("deliver: InFlight %d is not in 1..%d", o.InFlight, MaxInFlight)
	case o.BatchEntries < 1 || o.BatchEntries > MaxBatchEntries:
		return fmt.Errorf("deliver: BatchEntries %d is not in 1..%d", o.BatchEntries, MaxBatchEntries)
	case o.BatchBytes < 1 || o.BatchBytes > MaxBatchBytes:
		return fmt.Errorf("deliver: BatchBytes %d is not in 1..%d", o.BatchBytes, MaxBatchBytes)
	case o.BackoffBase < 0 || o.BackoffMax < o.BackoffBase:
		return fmt.Errorf("deliver: BackoffBase %v and BackoffMax %v: want 0 ≤ base ≤ max", o.BackoffBase, o.BackoffMax)
	case o.Linger < 0 || o.Linger > MaxLinger:
		return fmt.Errorf("deliver: Linger %v is not in 0..%v", o.Linger, MaxLinger)
	case o.RetryAfterMax < 0 || o.MaxResponseBytes < 0:
		return errors.New("deliver: RetryAfterMax and MaxResponseBytes must not be negative")
	}
	return nil
}

// Loop delivers one spool's records to one repository.
type Loop struct {
	sp *spool.Spool
	o  Options

	mu       sync.Mutex
	rng      *rand.Rand
	retrying int // deliveries waiting to retry
	lastOK   bool
}

// New makes a delivery loop; Run runs it.
func New(sp *spool.Spool, o Options) (*Loop, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	seed := o.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	return &Loop{sp: sp, o: o, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}, nil
}

// Run delivers, oldest first, with at most InFlight deliveries under way (a
// delivery's slot is free once it and every delivery before it are done), until ctx
// ends or the spool closes; then it waits for the deliveries under way to stop. A
// record whose delivery was stopped stays in the spool and is delivered after the
// next Open. Run is called once per Open of the spool.
func (l *Loop) Run(ctx context.Context) error {
	slots := make(chan struct{}, l.o.InFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	var carry *spool.Record
	prev := make(chan struct{})
	close(prev)
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		var recs []spool.Record
		if carry != nil {
			recs = append(recs, *carry)
		} else {
			rec, err := l.sp.Next(ctx)
			if err != nil {
				if errors.Is(err, spool.ErrClosed) || ctx.Err() != nil {
					return nil
				}
				return err
			}
			recs = append(recs, rec)
		}
		recs, carry = l.fill(ctx, recs)
		before, mine := prev, make(chan struct{})
		prev = mine
		wg.Go(func() {
			l.deliver(ctx, recs)
			// The slot is freed in order: a delivery that finished early waits for
			// the ones before it, so that records handed out and not yet under the
			// durable cursor never exceed InFlight deliveries. That bounds what a
			// crash delivers twice.
			select {
			case <-before:
			case <-ctx.Done():
			}
			close(mine)
			<-slots
		})
	}
}

// fill adds to recs (one record) what is ready, up to a full batch, waiting Linger
// for more while it is not full. A record that would take the batch past BatchBytes
// is returned as the next batch's first.
func (l *Loop) fill(ctx context.Context, recs []spool.Record) ([]spool.Record, *spool.Record) {
	size := len(recs[0].Payload)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for l.o.Batch && len(recs) < l.o.BatchEntries {
		rec, ok, ready, err := l.sp.TryNext()
		if err != nil {
			break
		}
		if !ok {
			if l.o.Linger <= 0 {
				break
			}
			if timer == nil {
				timer = time.NewTimer(l.o.Linger)
			}
			select {
			case <-ready:
				continue
			case <-timer.C:
			case <-ctx.Done():
			}
			break
		}
		if size+len(rec.Payload) > l.o.BatchBytes {
			return recs, &rec
		}
		recs = append(recs, rec)
		size += len(rec.Payload)
	}
	return recs, nil
}

// outcome is one record's result of one exchange.
type outcome struct {
	verdict    Verdict
	status     int
	issues     []string
	retryAfter time.Duration
	hasAfter   bool
}

// deliver sends recs until each is delivered or quarantined, or ctx ends.
func (l *Loop) deliver(ctx context.Context, recs []spool.Record) {
	attempt := 0
	retrying := false
	defer func() {
		if retrying {
			l.note(-1, nil)
		}
	}()
	for len(recs) > 0 {
		attempt++
		outs := l.send(ctx, recs)
		if ctx.Err() != nil {
			return
		}
		var acked []uint64
		var again []spool.Record
		var wait time.Duration
		hasAfter := false
		for i, rec := range recs {
			o := outs[i]
			switch o.verdict {
			case Delivered:
				acked = append(acked, rec.Seq)
			case Rejected:
				why := spool.Reason{Kind: "rejected", Status: o.status, Issues: o.issues, Attempts: attempt, Time: l.o.Now().UTC()}
				if err := l.sp.Quarantine(rec, why); err != nil {
					l.o.Logf("audit: quarantine of record %d failed, it is retried: %v", rec.Seq, err)
					again = append(again, rec)
				}
			default:
				again = append(again, rec)
				if o.hasAfter {
					hasAfter = true
					wait = max(wait, o.retryAfter)
				}
			}
		}
		if len(acked) > 0 {
			if err := l.sp.Ack(acked...); err != nil {
				l.o.Logf("audit: acknowledging delivered records: %v", err)
			}
		}
		ok := len(again) == 0
		switch {
		case ok && retrying:
			retrying = false
			l.note(-1, &ok)
			return
		case ok:
			l.note(0, &ok)
			return
		case !retrying:
			retrying = true
			l.note(1, &ok)
		default:
			l.note(0, &ok)
		}
		if !hasAfter {
			l.mu.Lock()
			r := l.rng.Float64()
			l.mu.Unlock()
			wait = Backoff(attempt, l.o.BackoffBase, l.o.BackoffMax, r)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		recs = again
	}
}

// note moves the count of deliveries in retry by d and, when ok is set, records
// whether the last exchange delivered everything it carried; then it tells the spool.
func (l *Loop) note(d int, ok *bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.retrying += d
	if ok != nil {
		l.lastOK = *ok
	}
	l.sp.SetDelivery(l.lastOK, l.retrying > 0)
}

// send makes one exchange for recs: one POST per record, or one batch (resent
// singly when the repository refuses the batch as a whole with a 4xx such as 413).
func (l *Loop) send(ctx context.Context, recs []spool.Record) []outcome {
	if !l.o.Batch || len(recs) == 1 {
		outs := make([]outcome, len(recs))
		for i, r := range recs {
			outs[i] = l.sendOne(ctx, r)
		}
		return outs
	}
	outs, whole := l.sendBatch(ctx, recs)
	if whole.verdict == Rejected {
		for i, r := range recs {
			outs[i] = l.sendOne(ctx, r)
		}
	}
	return outs
}

func (l *Loop) sendOne(ctx context.Context, r spool.Record) outcome {
	status, h, body, err := l.post(ctx, l.o.BaseURL+"/AuditEvent", r.Payload)
	if err != nil {
		return outcome{verdict: Retry}
	}
	return l.outcomeOf(status, h, body)
}

func (l *Loop) outcomeOf(status int, h http.Header, body []byte) outcome {
	o := outcome{verdict: Classify(status), status: status}
	if o.verdict == Rejected {
		o.issues = issueCodes(body)
	}
	if o.verdict == Retry || o.verdict == RetryAuth {
		o.retryAfter, o.hasAfter = ParseRetryAfter(h.Get("Retry-After"), l.o.Now(), l.o.RetryAfterMax)
	}
	return o
}

// bundleEntry is what delivery reads of an entry of a batch-response: its response
// (a resource the repository echoes is skipped, never copied).
type bundleEntry struct {
	Response *struct {
		Status  string          `json:"status"`
		Outcome json.RawMessage `json:"outcome,omitempty"`
	} `json:"response,omitempty"`
}

// sendBatch posts one batch Bundle. whole is the verdict on the batch as a whole
// (Rejected asks for the records to be sent singly); outs is each record's.
func (l *Loop) sendBatch(ctx context.Context, recs []spool.Record) (outs []outcome, whole outcome) {
	outs = make([]outcome, len(recs))
	var b bytes.Buffer
	size := 64
	for _, r := range recs {
		size += len(r.Payload) + len(`{"resource":,"request":{"method":"POST","url":"AuditEvent"}},`)
	}
	b.Grow(size)
	b.WriteString(`{"resourceType":"Bundle","type":"batch","entry":[`)
	for i, r := range recs {
		if i > 0 {
			b.WriteByte(',')
		}
		if vouched := r.Kept && l.o.KeptIsJSON; !vouched && !json.Valid(r.Payload) {
			// Not JSON at all: no repository takes it. Sent singly, it is
			// rejected and quarantined with the repository's own reason.
			return outs, outcome{verdict: Rejected}
		}
		b.WriteString(`{"resource":`)
		b.Write(r.Payload)
		b.WriteString(`,"request":{"method":"POST","url":"AuditEvent"}}`)
	}
	b.WriteString(`]}`)
	status, h, body, err := l.post(ctx, l.o.BaseURL, b.Bytes())
	if err != nil {
		for i := range outs {
			outs[i] = outcome{verdict: Retry}
		}
		return outs, outcome{verdict: Retry}
	}
	whole = l.outcomeOf(status, h, body)
	if whole.verdict != Delivered {
		for i := range outs {
			outs[i] = whole
		}
		return outs, whole
	}
	var resp struct {
		ResourceType string        `json:"resourceType"`
		Type         string        `json:"type"`
		Entry        []bundleEntry `json:"entry"`
	}
	if json.Unmarshal(body, &resp) != nil || resp.ResourceType != "Bundle" || resp.Type != "batch-response" || len(resp.Entry) != len(recs) {
		// A 2xx the gateway cannot read is no proof of delivery: retried.
		for i := range outs {
			outs[i] = outcome{verdict: Retry, status: status}
		}
		return outs, outcome{verdict: Retry, status: status}
	}
	for i, e := range resp.Entry {
		st := 0
		if e.Response != nil {
			f, _, _ := strings.Cut(strings.TrimSpace(e.Response.Status), " ")
			st, _ = strconv.Atoi(f)
		}
		if st == 0 {
			outs[i] = outcome{verdict: Retry}
			continue
		}
		outs[i] = outcome{verdict: Classify(st), status: st}
		if outs[i].verdict == Rejected && e.Response != nil {
			outs[i].issues = issueCodes(e.Response.Outcome)
		}
	}
	return outs, whole
}

func (l *Loop) post(ctx context.Context, u string, body []byte) (int, http.Header, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, l.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/fhir+json")
	req.Header.Set("Accept", "application/fhir+json")
	// Only the status of each record is read: the repository need not send the
	// stored resources back (FHIR's Prefer: return=minimal).
	req.Header.Set("Prefer", "return=minimal")
	if l.o.Authorize != nil {
		if err := l.o.Authorize(req); err != nil {
			return 0, nil, nil, err
		}
	}
	resp, err := l.o.Client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, l.o.MaxResponseBytes))
	if err != nil && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// The 2xx did not arrive whole: it proves nothing.
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, b, nil
}

// maxIssues bounds the issue codes kept in a reason.
const maxIssues = 10

// issueCodes are the issue codes of an OperationOutcome body, at most maxIssues,
// each a FHIR code (never free text from the repository).
func issueCodes(body []byte) []string {
	var oo struct {
		ResourceType string `json:"resourceType"`
		Issue        []struct {
			Code string `json:"code"`
		} `json:"issue"`
	}
	if json.Unmarshal(body, &oo) != nil || oo.ResourceType != "OperationOutcome" {
		return nil
	}
	var out []string
	for _, is := range oo.Issue {
		if len(out) == maxIssues {
			break
		}
		if c := is.Code; c != "" && len(c) <= 64 && !strings.ContainsAny(c, " \t\r\n\"") {
			out = append(out, c)
		}
	}
	return out
}
