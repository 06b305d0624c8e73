package health

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/lifecycle"
)

// Probe routes, relative to server.base_path.
const (
	LivenessPath  = "/health"
	ReadinessPath = "/health/readiness"
)

// RetryAfterSeconds is what the gate tells a client to wait before it tries again.
const RetryAfterSeconds = 5

// Handlers answer the probe routes. They are thin: the readiness decision is Evaluate,
// the body is ReadinessBody.
//
// Liveness and readiness are also plain net/http handlers (ServeLiveness,
// ServeReadiness), which the server runs ahead of its router: a probe is the request a
// gateway answers most and must answer under any load, so it costs what a bare handler
// costs. Neither allocates beyond net/http's own request: the liveness answer is
// constant, and the readiness answer is rendered once per report (one per cache TTL),
// not once per probe.
type Handlers struct {
	State *State
	Eval  *Evaluator
	// Minimal reports whether health.minimal is on (read per request: a reload may change it).
	Minimal func() bool

	// answers are the last readiness answer rendered, verbose [0] and minimal [1].
	answers [2]atomic.Pointer[readinessAnswer]
}

// readinessAnswer is ReadinessBody of one report in one phase, with its headers.
type readinessAnswer struct {
	report *Report
	phase  lifecycle.Phase
	code   int
	body   []byte
	length []string // the Content-Length header's value
}

// Header values, shared by every answer: net/http copies the header map before it
// writes it (Header.Clone), so no answer can change another's.
var (
	jsonType = []string{"application/json"}
	noStore  = []string{"no-store"}
)

// Liveness answers 200 {"status":"alive"} whatever the checks, the configuration or the
// drain: a failing dependency must never make the kubelet restart a healthy process.
func (h *Handlers) Liveness(c *gin.Context) {
	h.ServeLiveness(c.Writer, c.Request)
}

// ServeLiveness is Liveness for net/http; it returns the status code it answered.
func (h *Handlers) ServeLiveness(w http.ResponseWriter, r *http.Request) int {
	writeAnswer(w, r, http.StatusOK, livenessBody, livenessLength)
	return http.StatusOK
}

var (
	livenessBody   = []byte(`{"status":"alive"}` + "\n")
	livenessLength = []string{strconv.Itoa(len(livenessBody))}
)

// Readiness answers {base}/health/readiness. While draining it answers 503 at once,
// without running a check, so that a balancer stops routing here before the listener
// closes; its body then shows the last report's checks. ?verbose=0 asks for the minimal
// body; health.minimal forces it, and ?verbose=1 does not undo that (a deployment that
// hides its checks' names hides them from every caller).
func (h *Handlers) Readiness(c *gin.Context) {
	h.ServeReadiness(c.Writer, c.Request)
}

// ServeReadiness is Readiness for net/http; it returns the status code it answered.
func (h *Handlers) ServeReadiness(w http.ResponseWriter, r *http.Request) int {
	minimal := (h.Minimal != nil && h.Minimal()) || verboseZero(r.URL.RawQuery)
	var report *Report
	if h.State.Draining() {
		report = h.Eval.Last()
	} else {
		report = h.Eval.Evaluate(r.Context())
		if report.Ready() {
			h.State.MarkServing()
		}
	}
	a := h.answer(h.State.Phase(), report, minimal)
	writeAnswer(w, r, a.code, a.body, a.length)
	return a.code
}

// answer is ReadinessBody(phase, report, minimal), rendered again only when the report
// or the phase changed since the last answer of that form.
func (h *Handlers) answer(phase lifecycle.Phase, report *Report, minimal bool) *readinessAnswer {
	slot := &h.answers[0]
	if minimal {
		slot = &h.answers[1]
	}
	if a := slot.Load(); a != nil && a.report == report && a.phase == phase && report != nil {
		return a
	}
	code, body := ReadinessBody(phase, report, minimal)
	a := &readinessAnswer{report: report, phase: phase, code: code, body: body, length: []string{strconv.Itoa(len(body))}}
	slot.Store(a)
	return a
}

// verboseZero reports whether the query's first verbose is "0", as gin's c.Query reads
// it. It parses only when there is a query, so that a bare probe allocates nothing.
func verboseZero(rawQuery string) bool {
	if rawQuery == "" {
		return false
	}
	q, _ := url.ParseQuery(rawQuery) // gin's c.Query ignores a malformed query the same way
	return q.Get("verbose") == "0"
}

// ReadinessCheck answers {base}/health/readiness/{check}: that check alone, from the
// same cached report, 200 when it passed and 503 when not; 404 for an unknown name.
// It reports the check, not the process: the phase is in the body but does not change
// the status (the drain is what {base}/health/readiness answers).
func (h *Handlers) ReadinessCheck(c *gin.Context) {
	name := c.Param("check")
	if !h.Eval.Has(name) {
		writeJSON(c, http.StatusNotFound, []byte(`{"status":"unknown check"}`+"\n"))
		return
	}
	report := h.Eval.Evaluate(c.Request.Context())
	res, _ := report.Result(name)
	code, body := CheckBody(h.State.Phase(), res)
	writeJSON(c, code, body)
}

// ReadinessBody renders a readiness answer. It is pure: the status is 200 only when the
// phase is not draining and every check passed. checks keep the order of the checks;
// reasons name every failing check ("<check>_timeout", "<check>_failed") and
// "draining" while the drain runs. minimal keeps status and phase only.
func ReadinessBody(phase lifecycle.Phase, report *Report, minimal bool) (int, []byte) {
	ready := phase != lifecycle.PhaseDraining && report.Ready()
	code, status := http.StatusServiceUnavailable, "unready"
	if ready {
		code, status = http.StatusOK, "ready"
	}
	var b bytes.Buffer
	b.WriteString(`{"status":`)
	writeString(&b, status)
	b.WriteString(`,"phase":`)
	writeString(&b, string(phase))
	if !minimal {
		b.WriteString(`,"checks":{`)
		if report != nil {
			for i, r := range report.Results {
				if i > 0 {
					b.WriteByte(',')
				}
				writeString(&b, r.Name)
				b.WriteByte(':')
				writeString(&b, string(r.Status))
			}
		}
		b.WriteByte('}')
		reasons := report.Reasons()
		if phase == lifecycle.PhaseDraining {
			reasons = append([]string{"draining"}, reasons...)
		} else if report == nil || len(report.Results) == 0 {
			reasons = append(reasons, "no_report")
		}
		if len(reasons) > 0 {
			b.WriteString(`,"reasons":[`)
			for i, r := range reasons {
				if i > 0 {
					b.WriteByte(',')
				}
				writeString(&b, r)
			}
			b.WriteByte(']')
		}
	}
	b.WriteString("}\n")
	return code, b.Bytes()
}

// CheckBody renders the answer of one check's sub-path.
func CheckBody(phase lifecycle.Phase, r Result) (int, []byte) {
	code := http.StatusServiceUnavailable
	if r.OK() {
		code = http.StatusOK
	}
	var b bytes.Buffer
	b.WriteString(`{"check":`)
	writeString(&b, r.Name)
	b.WriteString(`,"status":`)
	writeString(&b, string(r.Status))
	b.WriteString(`,"phase":`)
	writeString(&b, string(phase))
	if r.Reason != "" {
		b.WriteString(`,"reasons":[`)
		writeString(&b, r.Reason)
		b.WriteByte(']')
	}
	b.WriteString("}\n")
	return code, b.Bytes()
}

func writeString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s) // a string always marshals
	b.Write(q)
}

// writeAnswer writes the same status and headers for GET and HEAD; on HEAD net/http
// sends the Content-Length without the body.
func writeAnswer(w http.ResponseWriter, r *http.Request, code int, body []byte, length []string) {
	h := w.Header()
	h["Content-Type"] = jsonType
	h["Cache-Control"] = noStore
	h["Content-Length"] = length
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body) // a client gone is nothing to answer
	}
}

// writeJSON writes the same status and headers for GET and HEAD: on HEAD net/http
// discards the body but still sends its Content-Length.
func writeJSON(c *gin.Context, code int, body []byte) {
	h := c.Writer.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	c.Data(code, "application/json", body)
}

// Gate is the readiness gate of the data plane: before the process was fully ready once
// it answers 503 with Retry-After and a FHIR OperationOutcome; after that it lets every
// request through, during the drain too. Its fast path is one atomic load and no
// allocation, because it sits in front of every data-plane request.
func Gate(s *State) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !s.Open() {
			refuse(c)
		}
		// Returning without c.Next() lets gin run the next handler: cheaper than a call.
	}
}

func refuse(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	h.Set("Cache-Control", "no-store")
	c.Data(http.StatusServiceUnavailable, "application/fhir+json", notReadyOutcome)
	c.Abort()
}

var notReadyOutcome = OperationOutcome("transient", "the gateway is starting and not ready yet; retry later")

// OperationOutcome renders a FHIR R4 OperationOutcome with one error issue.
func OperationOutcome(code, diagnostics string) []byte {
	type issue struct {
		Severity    string `json:"severity"`
		Code        string `json:"code"`
		Diagnostics string `json:"diagnostics,omitempty"`
	}
	body, _ := json.Marshal(struct {
		ResourceType string  `json:"resourceType"`
		Issue        []issue `json:"issue"`
	}{"OperationOutcome", []issue{{"error", code, diagnostics}}})
	return append(body, '\n')
}

// ConfigCheck is the "config" check that readiness always starts with: it passes while a
// valid configuration is serving. A refused reload does not fail it, because the
// previous configuration keeps serving; loaded reports whether one is.
func ConfigCheck(loaded func() bool) Check {
	return NamedCheck("config", func(context.Context) error {
		if !loaded() {
			return errNoConfig
		}
		return nil
	})
}

var errNoConfig = errorString("no valid configuration is loaded")

type errorString string

func (e errorString) Error() string { return string(e) }
