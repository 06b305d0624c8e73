// Package xcpd is the localizer of the gateway over IHE XCPD ([localizer] protocol =
// "xcpd", report key "localizer", docs/bindings.md#localizer): one Cross Gateway Patient
// Discovery [ITI-55] exchange, SOAP 1.2 over HTTP, a PRPA_IN201305UV02 naming the
// patient by its livingSubjectId, answered with a PRPA_IN201306UV02 whose
// registrationEvents' custodians are the communities that hold the patient (a member
// holds it when its registry.members[].home_community_id is among them).
//
// The answer is read by a streaming parser bounded in size (localizer.max_body_bytes,
// by the binding's client), in depth (MaxDepth) and in tokens (MaxTokens), that refuses
// a DOCTYPE (so no entity is ever declared, let alone expanded or fetched): Go's
// encoding/xml resolves no external entity, and a strict decoder refuses an undeclared
// one.
//
// The cases (ITI TF-2 §3.55.4.2.3) and the state:
//
//	case 1/2  AA, OK, registrationEvents      up, the candidate set
//	case 3/4  AA, OK without events, or NF    up, no member holds the patient
//	case 5    AE                              up, a failure answered below 500: fail open
//	4xx, a malformed or hostile answer        up, fail open
//	5xx (a SOAP Receiver fault)               failing, fail open
//	refused, reset, past the budget           down, fail open
//	the audit record not stored               failing, the answer not used: fail open
//	the budget spent before the request left  unchanged, fail open
package xcpd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings"
	"github.com/ferrofed/ferrofed/gateway/config"
	"github.com/ferrofed/ferrofed/gateway/dependencies"
)

// Key is the localizer's report key.
const Key = "localizer"

// ITI-55's actions and namespaces, and the exchange's IHE transaction.
const (
	RequestAction      = "urn:hl7-org:v3:PRPA_IN201305UV02:CrossGatewayPatientDiscovery"
	SOAPNamespace      = "http://www.w3.org/2003/05/soap-envelope"
	WSANamespace       = "http://www.w3.org/2005/08/addressing"
	HL7Namespace       = "urn:hl7-org:v3"
	Transaction        = "ITI-55"
	TransactionDisplay = "Cross Gateway Patient Discovery"
)

// Bounds of the answer's parse.
const (
	// MaxDepth bounds the nesting of elements: a PRPA_IN201306UV02 in its envelope is
	// about 15 deep.
	MaxDepth = 64
	// MaxTokens bounds the tokens read of one answer.
	MaxTokens = 200000
)

// Options build a Client.
type Options struct {
	Service  config.BindingService
	Recorder bindings.Recorder
	Metrics  *bindings.Metrics
	// Tracker is the dependency report the binding's state goes into, "unknown"
	// until its first exchange; required.
	Tracker *dependencies.Tracker
}

// Client asks one responding gateway.
type Client struct {
	url     string
	client  *bindings.Client
	rec     bindings.Recorder
	timeout time.Duration
	tracker *dependencies.Tracker
}

// New builds the client; the credential files are read now.
func New(o Options) (*Client, error) {
	timeout := o.Service.Timeout()
	c, err := bindings.NewClient(bindings.ClientOptions{Name: Key, Table: "localizer", Timeout: timeout,
		MaxResponseBytes: o.Service.BodyCap(), Credentials: o.Service.Credentials, Metrics: o.Metrics})
	if err != nil {
		return nil, err
	}
	o.Tracker.SetService(Key, dependencies.Unknown, "")
	return &Client{url: o.Service.URL, client: c, rec: o.Recorder, timeout: timeout, tracker: o.Tracker}, nil
}

// Timeout is the localizer's own budget.
func (c *Client) Timeout() time.Duration { return c.timeout }

// Answer is what the responding gateway said: the communities that hold the patient
// (homeCommunityIds without their urn:oid: prefix), none for cases 3 and 4.
type Answer struct {
	Communities map[string]bool
}

// ErrNotAsked is a patient the localizer cannot be asked about: XCPD names a patient
// by an OID-rooted identifier.
var ErrNotAsked = errors.New("xcpd: the patient's identifier system is not an OID")

// Locate asks which communities hold system|value. An error means the localizer
// failed (the flow then fails open); it says why, never the body.
func (c *Client) Locate(ctx context.Context, system, value string) (Answer, error) {
	root, ok := strings.CutPrefix(system, "urn:oid:")
	if !ok {
		return Answer{}, ErrNotAsked
	}
	msgID := "urn:uuid:" + uuid()
	payload := Request(msgID, c.url, root, value)
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(payload))
	if err != nil {
		return Answer{}, err
	}
	req.Header.Set("Content-Type", `application/soap+xml; charset=utf-8; action="`+RequestAction+`"`)
	start := time.Now()
	ex := c.client.Do(ctx, req)
	var a Answer
	why := ""
	switch {
	case !ex.Answered || ex.TooLarge:
		why = "gave no usable answer"
	case ex.Status != http.StatusOK:
		why = fmt.Sprintf("answered %d", ex.Status)
	default:
		if a, err = Parse(ex.Body); err != nil {
			why = "answered with " + err.Error()
		}
	}
	ev := bindings.QueryEvent{Key: Key, Transaction: Transaction, TransactionDisplay: TransactionDisplay, Time: start,
		Query: payload, PatientSystem: system, PatientValue: value}
	if !bindings.Finish(ctx, ex, ev, c.rec, c.timeout, c.tracker) {
		return Answer{}, errors.New("the audit record of the localizer's exchange could not be stored")
	}
	if why != "" {
		return Answer{}, errors.New("the localizer " + why)
	}
	return a, nil
}

// Request is the SOAP 1.2 envelope of a PRPA_IN201305UV02 asking for the patient
// root|extension.
func Request(messageID, to, root, extension string) []byte {
	var b bytes.Buffer
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w(`<?xml version="1.0" encoding="UTF-8"?>`)
	w(`<env:Envelope xmlns:env="%s" xmlns:wsa="%s"><env:Header>`, SOAPNamespace, WSANamespace)
	w(`<wsa:Action env:mustUnderstand="1">%s</wsa:Action><wsa:MessageID>%s</wsa:MessageID>`, RequestAction, esc(messageID))
	w(`<wsa:ReplyTo><wsa:Address>http://www.w3.org/2005/08/addressing/anonymous</wsa:Address></wsa:ReplyTo><wsa:To env:mustUnderstand="1">%s</wsa:To>`, esc(to))
	w(`</env:Header><env:Body><PRPA_IN201305UV02 xmlns="%s" ITSVersion="XML_1.0">`, HL7Namespace)
	w(`<id root="%s"/><creationTime value="%s"/>`, esc(strings.TrimPrefix(messageID, "urn:uuid:")), time.Now().UTC().Format("20060102150405"))
	w(`<interactionId root="2.16.840.1.113883.1.6" extension="PRPA_IN201305UV02"/><processingCode code="P"/><processingModeCode code="T"/><acceptAckCode code="AL"/>`)
	w(`<receiver typeCode="RCV"><device classCode="DEV" determinerCode="INSTANCE"><id nullFlavor="UNK"/></device></receiver>`)
	w(`<sender typeCode="SND"><device classCode="DEV" determinerCode="INSTANCE"><id nullFlavor="UNK"/></device></sender>`)
	w(`<controlActProcess classCode="CACT" moodCode="EVN"><code code="PRPA_TE201305UV02" codeSystem="2.16.840.1.113883.1.6"/>`)
	w(`<queryByParameter><queryId root="%s"/><statusCode code="new"/><responseModalityCode code="R"/><responsePriorityCode code="I"/>`, esc(strings.TrimPrefix(messageID, "urn:uuid:")))
	w(`<parameterList><livingSubjectId><value root="%s" extension="%s"/><semanticsText>LivingSubject.id</semanticsText></livingSubjectId></parameterList>`, esc(root), esc(extension))
	w(`</queryByParameter></controlActProcess></PRPA_IN201305UV02></env:Body></env:Envelope>`)
	return b.Bytes()
}

// Parse reads a PRPA_IN201306UV02 in its SOAP 1.2 envelope, bounded: a DOCTYPE, an
// element deeper than MaxDepth or more than MaxTokens tokens is refused. A SOAP
// fault, case 5 (AE) or an answer that is no PRPA_IN201306UV02 is an error.
func Parse(body []byte) (Answer, error) {
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = true
	var stack []string
	a := Answer{Communities: map[string]bool{}}
	var envelope, response, fault bool
	ack, code := "", ""
	for n := 0; ; n++ {
		if n >= MaxTokens {
			return Answer{}, fmt.Errorf("an answer of more than %d XML tokens", MaxTokens)
		}
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Answer{}, errors.New("a body that is not well-formed XML")
		}
		switch t := tok.(type) {
		case xml.Directive:
			return Answer{}, errors.New("an answer with a DOCTYPE (entity declarations are refused)")
		case xml.StartElement:
			if len(stack) >= MaxDepth {
				return Answer{}, fmt.Errorf("an answer nested deeper than %d elements", MaxDepth)
			}
			name := t.Name.Local
			parent := ""
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			switch {
			case len(stack) == 0 && name == "Envelope":
				envelope = true
			case name == "Fault" && parent == "Body":
				fault = true
			case name == "PRPA_IN201306UV02" && parent == "Body":
				response = true
			case name == "typeCode" && parent == "acknowledgement":
				ack = attr(t, "code")
			case name == "queryResponseCode" && parent == "queryAck":
				code = attr(t, "code")
			case name == "id" && parent == "assignedEntity" && len(stack) >= 2 && stack[len(stack)-2] == "custodian":
				if root := attr(t, "root"); root != "" {
					a.Communities[strings.TrimPrefix(root, "urn:oid:")] = true
				}
			}
			stack = append(stack, name)
		case xml.EndElement:
			// Token has matched it with its start element.
			stack = stack[:len(stack)-1]
		}
	}
	switch {
	case !envelope:
		return Answer{}, errors.New("a body that is not a SOAP envelope")
	case fault:
		return Answer{}, errors.New("a SOAP fault")
	case !response:
		return Answer{}, errors.New("an envelope without a PRPA_IN201306UV02")
	case ack == "AE" || code == "AE":
		return Answer{}, errors.New("an application error (case 5)")
	case ack != "AA" || (code != "OK" && code != "NF"):
		return Answer{}, fmt.Errorf("an acknowledgement %q with query response %q", ack, code)
	case code == "NF":
		return Answer{Communities: map[string]bool{}}, nil
	}
	return a, nil
}

// Holds reports whether the community of a member's home_community_id holds the patient.
func (a Answer) Holds(homeCommunityID string) bool {
	return a.Communities[strings.TrimPrefix(homeCommunityID, "urn:oid:")]
}

func attr(t xml.StartElement, name string) string {
	for _, a := range t.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func esc(s string) string {
	var b bytes.Buffer
	xml.EscapeText(&b, []byte(s)) //nolint:errcheck // a bytes.Buffer does not fail.
	return b.String()
}

func uuid() string {
	var b [16]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand does not fail.
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
