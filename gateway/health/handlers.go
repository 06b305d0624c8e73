package health

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"

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
type Handlers struct {
	State *State
	Eval  *Evaluator
	// Minimal reports whether health.minimal is on (read per request: a reload may change it).
	Minimal func() bool
}

// Liveness answers 200 {"status":"alive"} whatever the checks, the configuration or the
// drain: a failing dependency must never make the kubelet restart a healthy process.
func (h *Handlers) Liveness(c *gin.Context) {
	writeJSON(c, http.StatusOK, livenessBody)
}

var livenessBody = []byte(`{"status":"alive"}` + "\n")

// Readiness answers {base}/health/readiness. While draining it answers 503 at once,
// without running a check, so that a balancer stops routing here before the listener
// closes; its body then shows the last report's checks. ?verbose=0 asks for the minimal
// body; health.minimal forces it, and ?verbose=1 does not undo that (a deployment that
// hides its checks' names hides them from every caller).
func (h *Handlers) Readiness(c *gin.Context) {
	minimal := c.Query("verbose") == "0" || (h.Minimal != nil && h.Minimal())
	var report *Report
	if h.State.Draining() {
		report = h.Eval.Last()
	} else {
		report = h.Eval.Evaluate(c.Request.Context())
		if report.Ready() {
			h.State.MarkServing()
		}
	}
	code, body := ReadinessBody(h.State.Phase(), report, minimal)
	writeJSON(c, code, body)
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
