package bindings

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
	"github.com/ferrofed/ferrofed/gateway/outbound"
	"github.com/ferrofed/ferrofed/gateway/tracing"
)

// Limits of ClientOptions.
const (
	DefaultTimeout          = 5 * time.Second
	DefaultMaxResponseBytes = 1 << 20
	// MaxResponseBytesLimit bounds any binding's cap.
	MaxResponseBytesLimit = 64 << 20
	// MaxResponseHeaderBytes bounds the head (status line and headers) of every
	// binding's answer, whatever its transport: Go's default is 10 MiB per exchange.
	MaxResponseHeaderBytes = 64 << 10
)

// ErrResponseTooLarge is the read error of an answer body past the binding's cap.
var ErrResponseTooLarge = errors.New("binding: answer larger than the binding's cap")

// Rule is a binding's state rule: the state one exchange observed, from whether an
// answer came back and its status (each binding's table in docs/bindings.md).
// dependencies.FromHTTP is the common one.
type Rule func(answered bool, status int) dependencies.State

// ClientOptions shape one binding's client.
type ClientOptions struct {
	// Name is the binding's report key ("audit_repository"): the metrics' binding
	// label and the tracker's key.
	Name string
	// Timeout bounds one exchange, the answer's body read included; default 5 s.
	Timeout time.Duration
	// MaxResponseBytes caps the answer body read; default 1 MiB, at most 64 MiB.
	MaxResponseBytes int64
	// Table is the configuration table the binding's keys are under ("consent",
	// "audit.feed"): an error of a credential file names its key.
	Table string
	// Credentials are the files named in the binding's table.
	Credentials config.Credentials
	// Metrics count the exchanges; nil counts nothing.
	Metrics *Metrics
	// Tracker and Rule, when both set, put the state of each exchange under Name. A
	// binding whose state is read from something it holds (the audit spool) sets
	// neither.
	Tracker *dependencies.Tracker
	Rule    Rule
	// Transport is the base transport; default a pooled one of the client's own.
	Transport *http.Transport
}

// Client is one binding's outbound client.
type Client struct {
	// HTTP sends the binding's requests: the budget, the cap, the observation and the
	// refusal of redirects are in it.
	HTTP *http.Client
	name string
	o    ClientOptions
}

// NewClient builds a binding's client; the credential files are read now (the token
// file again at each exchange, by Authorize). The error names the file.
func NewClient(o ClientOptions) (*Client, error) {
	if o.Name == "" || o.Table == "" {
		return nil, errors.New("binding: a client needs its binding's name and its configuration table")
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxResponseBytes == 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.Timeout < 0 || o.MaxResponseBytes < 0 || o.MaxResponseBytes > MaxResponseBytesLimit {
		return nil, fmt.Errorf("binding %s: timeout %v or answer cap %d out of range", o.Name, o.Timeout, o.MaxResponseBytes)
	}
	tr := o.Transport
	if tr == nil {
		tr = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: o.Timeout, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost:   8,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   o.Timeout,
			ExpectContinueTimeout: time.Second,
			ForceAttemptHTTP2:     true,
		}
	} else {
		tr = tr.Clone()
	}
	if tr.MaxResponseHeaderBytes <= 0 || tr.MaxResponseHeaderBytes > MaxResponseHeaderBytes {
		tr.MaxResponseHeaderBytes = MaxResponseHeaderBytes
	}
	cr := o.Credentials
	if cr.ClientCertificateFile != "" || cr.CAFile != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if tr.TLSClientConfig != nil {
			tc = tr.TLSClientConfig.Clone()
		}
		if cr.ClientCertificateFile != "" {
			pair, err := config.ReadKeyPair(o.Table+".client_certificate_file", cr.ClientCertificateFile, o.Table+".client_key_file", cr.ClientKeyFile)
			if err != nil {
				return nil, fmt.Errorf("binding %s: %w", o.Name, err)
			}
			tc.Certificates = []tls.Certificate{pair}
		}
		if cr.CAFile != "" {
			pool, err := config.ReadCertPool(o.Table+".ca_file", cr.CAFile)
			if err != nil {
				return nil, fmt.Errorf("binding %s: %w", o.Name, err)
			}
			tc.RootCAs = pool
		}
		tr.TLSClientConfig = tc
	}
	if cr.BearerTokenFile != "" {
		if _, err := config.ReadBearerToken(o.Table+".bearer_token_file", cr.BearerTokenFile); err != nil {
			return nil, fmt.Errorf("binding %s: %w", o.Name, err)
		}
	}
	c := &Client{name: o.Name, o: o}
	// Every exchange is a client span "binding {key}" under the request's span (or the
	// root of its own trace, for a binding's exchange no request made, when
	// Metrics.Tracer is set), sending its traceparent: docs/tracing.md.
	traced := &outbound.Traced{Base: tr, Name: tracing.SpanBindingPrefix + o.Name,
		Attributes: func(*http.Request) []attribute.KeyValue {
			return []attribute.KeyValue{tracing.AttrBinding.String(o.Name)}
		},
		Outcome: func(answered bool, status int) attribute.KeyValue {
			return tracing.AttrBindingOutcome.String(Outcome(answered, status))
		}}
	if o.Metrics != nil && o.Metrics.Tracer != nil {
		traced.Root = o.Metrics.Tracer
	}
	c.HTTP = &http.Client{
		Transport: observed{base: traced, c: c},
		Timeout:   o.Timeout,
		// A redirect is never followed: it would send the binding's credentials and
		// payload to a server the table did not name.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, nil
}

// Name is the binding's report key.
func (c *Client) Name() string { return c.name }

// Authorize sets the bearer token of the binding's token file on r, read now, so that
// a rotated token is used from the next exchange on.
func (c *Client) Authorize(r *http.Request) error {
	f := c.o.Credentials.BearerTokenFile
	if f == "" {
		return nil
	}
	tok, err := config.ReadBearerToken(c.o.Table+".bearer_token_file", f)
	if err != nil {
		return fmt.Errorf("binding %s: %w", c.name, err)
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	return nil
}

// CloseIdleConnections closes the client's idle connections (drain step 4).
func (c *Client) CloseIdleConnections() { c.HTTP.CloseIdleConnections() }

// observe records one exchange: its outcome and duration, and its state when the
// binding has a rule.
func (c *Client) observe(answered bool, status int, took time.Duration) {
	if m := c.o.Metrics; m != nil {
		m.requests.WithLabelValues(c.name, Outcome(answered, status)).Inc()
		m.duration.WithLabelValues(c.name).Observe(took.Seconds())
	}
	if c.o.Tracker != nil && c.o.Rule != nil {
		c.o.Tracker.SetService(c.name, c.o.Rule(answered, status), "")
	}
}

// The outcomes of ferrofed_binding_requests_total.
const (
	OutcomeSuccess     = "success"
	OutcomeRedirect    = "redirect"
	OutcomeClientError = "client_error"
	OutcomeServerError = "server_error"
	OutcomeNoAnswer    = "no_answer"
)

// Outcome is the outcome label of one exchange.
func Outcome(answered bool, status int) string {
	switch {
	case !answered:
		return OutcomeNoAnswer
	case status >= 500:
		return OutcomeServerError
	case status >= 400:
		return OutcomeClientError
	case status >= 300:
		return OutcomeRedirect
	default:
		return OutcomeSuccess
	}
}

// observed is the client's transport: it observes each exchange and caps its body.
type observed struct {
	base http.RoundTripper
	c    *Client
}

func (t observed) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		if outbound.HeadTooLarge(err) {
			// The service answered, with a head past MaxResponseHeaderBytes: its
			// failure, counted and stated as a 502 of its own would be.
			t.c.observe(true, http.StatusBadGateway, time.Since(start))
			return nil, err
		}
		t.c.observe(false, 0, time.Since(start))
		return nil, err
	}
	t.c.observe(true, resp.StatusCode, time.Since(start))
	resp.Body = &cappedBody{rc: resp.Body, left: t.c.o.MaxResponseBytes}
	return resp, nil
}

// cappedBody fails a read past the cap instead of handing the caller more.
type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body that ends exactly at the cap from a longer one.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, ErrResponseTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }
