package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// pushReceiver is a Pushgateway stand-in on a loopback listener: it records each push
// (method, path, and the body rendered as text exposition).
type pushReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	pushes []pushed
	// watch is a file read as each push arrives (the termination message), if set.
	watch string
}

type pushed struct {
	method, path, text string
	watched            string // what watch held as the push arrived
}

func newPushReceiver(t *testing.T) *pushReceiver {
	r := &pushReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		text, err := exposition(req)
		if err != nil {
			t.Errorf("push body: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		var watched []byte
		if r.watch != "" {
			watched, _ = os.ReadFile(r.watch)
		}
		r.pushes = append(r.pushes, pushed{req.Method, req.URL.Path, text, string(watched)})
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *pushReceiver) got() []pushed {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]pushed(nil), r.pushes...)
}

// exposition decodes a pushed body (delimited protobuf, as push sends it, or text) and
// renders it as text exposition.
func exposition(req *http.Request) (string, error) {
	dec := expfmt.NewDecoder(req.Body, expfmt.ResponseFormat(req.Header))
	var b bytes.Buffer
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); errors.Is(err, io.EOF) {
			return b.String(), nil
		} else if err != nil {
			return "", err
		}
		if _, err := expfmt.MetricFamilyToText(&b, &mf); err != nil {
			return "", err
		}
	}
}

func hostname(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		t.Skipf("no hostname: %v", err)
	}
	return h
}

func TestDrainPushesTheOutcomeOnceBeforeRunReturns(t *testing.T) {
	tests := []struct {
		name      string
		cut       bool
		want, not string
	}{
		{"a completed drain pushes outcome completed", false, `ferrofed_drain_total{outcome="completed"} 1`, `ferrofed_drain_total{outcome="cut"} 1`},
		{"a drain that cut a request pushes outcome cut", true, `ferrofed_drain_total{outcome="cut"} 1`, `ferrofed_drain_total{outcome="completed"} 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recv := newPushReceiver(t)
			sf := newTestSurface()
			t.Cleanup(func() { close(sf.release) }) // the blocked handler ignores its context
			logs := &logSink{}
			r := start(t, fmt.Sprintf("request_timeout_ms = 300\nbindings_drain_timeout_ms = 300\n[metrics]\npush_url = %q\npush_job = \"edge\"\n", recv.srv.URL+"/"),
				logs.logger(), withSurfaces(sf))
			recv.mu.Lock()
			recv.watch = r.terminationLog
			recv.mu.Unlock()
			if tt.cut {
				go call(newClient(), r.url+"/fhir/block")
				<-sf.entered
			}
			r.cancel()
			<-r.done
			if r.err != nil {
				t.Fatal(r.err)
			}

			got := recv.got() // Run returned: the push, if any, is over
			if len(got) != 1 {
				t.Fatalf("%d pushes, want 1", len(got))
			}
			p := got[0]
			if wantPath := "/metrics/job/edge/instance/" + hostname(t); p.method != http.MethodPut || p.path != wantPath {
				t.Errorf("pushed %s %s, want PUT %s", p.method, p.path, wantPath)
			}
			if !strings.Contains(p.text, tt.want) || strings.Contains(p.text, tt.not) {
				t.Errorf("the push does not say %s:\n%s", tt.want, grepLines(p.text, "ferrofed_drain"))
			}
			if !strings.Contains(p.text, `ferrofed_phase{phase="draining"} 1`) {
				t.Errorf("the push is not the whole registry at the end of the drain:\n%s", grepLines(p.text, "ferrofed_phase"))
			}
			if logs.find("Pushed the last metrics", `"took"=`, `"instance"=`) == "" {
				t.Errorf("the push is not logged with its duration: %v", logs.lines)
			}
			// The termination message is written before the push, with the same outcome.
			m, err := lifecycle.ParseTerminationMessage([]byte(p.watched))
			if err != nil {
				t.Fatalf("the termination message was not written when the push arrived: %v (%q)", err, p.watched)
			}
			if want := map[bool]string{false: OutcomeCompleted, true: OutcomeCut}[tt.cut]; m.Outcome != want {
				t.Errorf("termination message outcome %q, the push's %q", m.Outcome, want)
			}
		})
	}
}

func TestAFailedPushIsLoggedAndBoundedByItsTimeout(t *testing.T) {
	// A listener that accepts and never answers: the push can only time out.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	// A port nobody listens on: the push is refused at once.
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "http://" + refused.Addr().String()
	refused.Close()

	tests := []struct {
		name    string
		url     string
		longest time.Duration
	}{
		{"a receiver that never answers", "http://" + silent.Addr().String(), MaxPushTimeout + time.Second},
		{"a receiver that refuses the connection", refusedURL, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is logged and the drain returns within the push timeout", func(t *testing.T) {
			logs := &logSink{}
			r := start(t, fmt.Sprintf("[metrics]\npush_url = %q\n", tt.url), logs.logger())
			begin := time.Now()
			r.cancel()
			select {
			case <-r.done:
			case <-time.After(tt.longest + 5*time.Second):
				t.Fatal("Run did not return")
			}
			if took := time.Since(begin); took > tt.longest {
				t.Errorf("an idle drain with a failing push took %s, want at most %s", took, tt.longest)
			}
			if r.err != nil {
				t.Errorf("Run: %v (a failed push is not the server's failure)", r.err)
			}
			if logs.find("Metrics push failed", `"url"="`+tt.url+`"`, `"took"=`) == "" {
				t.Errorf("the failed push is not logged: %v", logs.lines)
			}
		})
	}
}

func TestNoPushWithoutAPushURL(t *testing.T) {
	logs := &logSink{}
	r := start(t, "", logs.logger())
	r.cancel()
	<-r.done
	if line := logs.find("push"); line != "" {
		t.Errorf("logged about a push that is not configured: %s", line)
	}
}

func TestPushTimeoutFitsWhatIsLeftOfTheGracePeriod(t *testing.T) {
	grace := func(s int64) *int64 { return &s }
	tests := []struct {
		name  string
		grace *int64
		since time.Duration
		want  time.Duration
	}{
		{"without a known grace period it is MaxPushTimeout", nil, time.Minute, MaxPushTimeout},
		{"with plenty left it is MaxPushTimeout", grace(30), 10 * time.Second, MaxPushTimeout},
		{"with little left it is half of what is left", grace(30), 28 * time.Second, time.Second},
		{"with nothing left it is not positive", grace(30), 31 * time.Second, -500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pushTimeout(tt.grace, tt.since); got != tt.want {
				t.Fatalf("pushTimeout = %s, want %s", got, tt.want)
			}
		})
	}
	if MaxPushTimeout*2 > lifecycle.DefaultTerminationHeadroom {
		t.Errorf("MaxPushTimeout %s does not fit twice in the default termination headroom", MaxPushTimeout)
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
