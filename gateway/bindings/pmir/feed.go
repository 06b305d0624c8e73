package pmir

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ferrofed/ferrofed/gateway/dependencies"
)

// The event URIs of ITI-93's request and response messages.
const (
	FeedEvent         = "urn:ihe:iti:pmir:2019:patient-feed"
	FeedResponseEvent = "urn:ihe:iti:pmir:2019:patient-feed-response"
)

// MaxFeedBytes bounds a feed message's body: 413 past it.
const MaxFeedBytes = 1 << 20

// Changes counts what one feed message does to patients.
type Changes struct {
	Creates, Updates, Merges, Deletes int
}

// Invalidates reports whether the message makes a cached mapping or decision stale.
func (c Changes) Invalidates() bool { return c.Updates+c.Merges+c.Deletes > 0 }

// Message is what the gateway reads of an ITI-93 message: its MessageHeader's id and
// what it changes.
type Message struct {
	HeaderID string
	Changes  Changes
}

// ParseMessage reads an ITI-93 Mobile Patient Identity Feed message (IHE.PMIR.Bundle):
// a Bundle of type message, entry[0] a MessageHeader with eventUri
// urn:ihe:iti:pmir:2019:patient-feed, entry[1] a history Bundle whose entries are
// Patient creates (POST), updates (PUT), merges (PUT of a Patient with active false and
// a replaced-by link) and deletes (DELETE). The error says what is wrong, in the
// gateway's words (never the body's).
func ParseMessage(body []byte) (Message, error) {
	type raw = json.RawMessage
	var b struct {
		ResourceType string `json:"resourceType"`
		Type         string `json:"type"`
		Entry        []struct {
			Resource raw `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return Message{}, errors.New("the body is not JSON")
	}
	if b.ResourceType != "Bundle" || b.Type != "message" {
		return Message{}, errors.New("the body is not a Bundle of type message")
	}
	if len(b.Entry) != 2 {
		return Message{}, fmt.Errorf("the message has %d entries: a PMIR message has a MessageHeader and a history Bundle", len(b.Entry))
	}
	var h struct {
		ResourceType string `json:"resourceType"`
		ID           string `json:"id"`
		EventURI     string `json:"eventUri"`
	}
	if json.Unmarshal(b.Entry[0].Resource, &h) != nil || h.ResourceType != "MessageHeader" {
		return Message{}, errors.New("the message's first entry is not a MessageHeader")
	}
	if h.EventURI != FeedEvent {
		return Message{}, errors.New("the MessageHeader's eventUri is not " + FeedEvent)
	}
	if h.ID == "" {
		return Message{}, errors.New("the MessageHeader has no id for the response to name")
	}
	var hist struct {
		ResourceType string `json:"resourceType"`
		Type         string `json:"type"`
		Entry        []struct {
			Resource *struct {
				ResourceType string `json:"resourceType"`
				Active       *bool  `json:"active"`
				Link         []struct {
					Type string `json:"type"`
				} `json:"link"`
			} `json:"resource"`
			Request struct {
				Method string `json:"method"`
			} `json:"request"`
		} `json:"entry"`
	}
	if json.Unmarshal(b.Entry[1].Resource, &hist) != nil || hist.ResourceType != "Bundle" || hist.Type != "history" {
		return Message{}, errors.New("the message's second entry is not a Bundle of type history")
	}
	m := Message{HeaderID: h.ID}
	for i, e := range hist.Entry {
		if e.Resource != nil && e.Resource.ResourceType != "Patient" {
			return Message{}, fmt.Errorf("history entry %d is not a Patient", i)
		}
		switch e.Request.Method {
		case http.MethodPost:
			m.Changes.Creates++
		case http.MethodPut:
			merged := false
			if e.Resource != nil && e.Resource.Active != nil && !*e.Resource.Active {
				for _, l := range e.Resource.Link {
					merged = merged || l.Type == "replaced-by"
				}
			}
			if merged {
				m.Changes.Merges++
			} else {
				m.Changes.Updates++
			}
		case http.MethodDelete:
			m.Changes.Deletes++
		default:
			return Message{}, fmt.Errorf("history entry %d has a request.method other than POST (create), PUT (update, merge) and DELETE", i)
		}
	}
	return m, nil
}

// receive is POST {base}/pmir/$process-message.
func (f *Feed) receive(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	values := c.Request.Header.Values("Authorization")
	authz := ""
	if len(values) == 1 {
		authz = values[0]
	} else if len(values) > 1 {
		authz = "Bearer ."
	}
	if _, e := f.verifier.VerifyScope(c.Request.Context(), authz, f.cfg.FeedScope); e != nil {
		c.Header("WWW-Authenticate", e.Challenge())
		code := e.Code
		if code == "" {
			code = "unauthorized"
		}
		c.AbortWithStatusJSON(e.Status, gin.H{"error": code, "error_description": e.Description})
		return
	}
	start := time.Now()
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxFeedBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		outcome(c, http.StatusRequestEntityTooLarge, "too-costly", fmt.Sprintf("a feed message is at most %d bytes", MaxFeedBytes))
		return
	case err != nil:
		outcome(c, http.StatusBadRequest, "incomplete", "the message's body could not be read")
		return
	}
	m, err := ParseMessage(body)
	what := "MessageHeader/" + m.HeaderID
	if err != nil {
		what = "a message that is not PMIR's"
	}
	if m.Changes.Invalidates() && f.invalidate != nil {
		// Clearing a cache is safe whatever happens next: do it first.
		f.invalidate()
	}
	ev := restEvent(interactionOperation, TransactionFeed, start, what)
	ev.Inbound, ev.Outcome = true, "0"
	if err != nil {
		ev.Outcome = "4"
	}
	if !f.record(c.Request.Context(), ev) {
		f.set(dependencies.Failing, FaultAuditFailed)
		outcome(c, http.StatusServiceUnavailable, "transient", "the message's audit record could not be stored: send it again later")
		return
	}
	if err != nil {
		outcome(c, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	f.log.Info("Received a PMIR feed message", "message", m.HeaderID, "creates", m.Changes.Creates, "updates", m.Changes.Updates,
		"merges", m.Changes.Merges, "deletes", m.Changes.Deletes, "invalidatedCaches", m.Changes.Invalidates())
	c.Data(http.StatusOK, "application/fhir+json", f.response(m.HeaderID, start))
}

// response is ITI-93's Mobile Patient Identity Feed Response: a message Bundle with
// one MessageHeader answering the request's id with code ok.
func (f *Feed) response(requestID string, now time.Time) []byte {
	id := newID()
	b, _ := json.Marshal(map[string]any{
		"resourceType": "Bundle",
		"id":           newID(),
		"type":         "message",
		"timestamp":    now.UTC().Format(time.RFC3339),
		"entry": []any{map[string]any{
			"fullUrl": "urn:uuid:" + id,
			"resource": map[string]any{
				"resourceType": "MessageHeader",
				"id":           id,
				"eventUri":     FeedResponseEvent,
				"source":       map[string]string{"endpoint": f.cfg.Endpoint},
				"response":     map[string]string{"identifier": requestID, "code": "ok"},
			},
		}},
	})
	return b
}

// outcome answers an OperationOutcome of one error issue.
func outcome(c *gin.Context, status int, code, text string) {
	b, _ := json.Marshal(map[string]any{
		"resourceType": "OperationOutcome",
		"issue":        []any{map[string]any{"severity": "error", "code": code, "diagnostics": text}},
	})
	c.Data(status, "application/fhir+json", b)
}

// newID is a random UUID (version 4).
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
