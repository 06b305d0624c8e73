package otelcol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Span is one span as the collector received it, flattened out of its resource and
// scope.
type Span struct {
	TraceID  string // 32 hex digits
	SpanID   string // 16 hex digits
	ParentID string // 16 hex digits; "" for a root span
	Name     string
	// Kind is "unspecified", "internal", "server", "client", "producer" or "consumer".
	Kind  string
	Start time.Time
	End   time.Time
	// Attributes holds each value as Go has it: string, int64, float64, bool, []byte,
	// []any (an array) or map[string]any (a key-value list).
	Attributes map[string]any
	Events     []Event
	Status     Status
	// Resource is the attributes of the span's resource (service.name, …).
	Resource map[string]any
	// Scope is the name of the instrumentation scope (the tracer's name).
	Scope string
}

// Event is a span's event.
type Event struct {
	Name       string
	Time       time.Time
	Attributes map[string]any
}

// Status is a span's status: Code is "unset", "ok" or "error".
type Status struct {
	Code    string
	Message string
}

// kindNames and statusCodes are the OTLP enumerations, by number.
var (
	kindNames   = []string{"unspecified", "internal", "server", "client", "producer", "consumer"}
	statusCodes = []string{"unset", "ok", "error"}
)

// The OTLP JSON encoding (the file exporter's format: json): one request per line.
type (
	request struct {
		ResourceSpans []struct {
			Resource struct {
				Attributes []keyValue `json:"attributes"`
			} `json:"resource"`
			ScopeSpans []struct {
				Scope struct {
					Name string `json:"name"`
				} `json:"scope"`
				Spans []wireSpan `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	}
	wireSpan struct {
		TraceID      string     `json:"traceId"`
		SpanID       string     `json:"spanId"`
		ParentSpanID string     `json:"parentSpanId"`
		Name         string     `json:"name"`
		Kind         int        `json:"kind"`
		Start        uint64s    `json:"startTimeUnixNano"`
		End          uint64s    `json:"endTimeUnixNano"`
		Attributes   []keyValue `json:"attributes"`
		Events       []struct {
			Name       string     `json:"name"`
			Time       uint64s    `json:"timeUnixNano"`
			Attributes []keyValue `json:"attributes"`
		} `json:"events"`
		Status struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"status"`
	}
	keyValue struct {
		Key   string   `json:"key"`
		Value anyValue `json:"value"`
	}
	anyValue struct {
		String *string  `json:"stringValue"`
		Bool   *bool    `json:"boolValue"`
		Int    *uint64s `json:"intValue"`
		Double *float64 `json:"doubleValue"`
		Bytes  *string  `json:"bytesValue"`
		Array  *struct {
			Values []anyValue `json:"values"`
		} `json:"arrayValue"`
		KVList *struct {
			Values []keyValue `json:"values"`
		} `json:"kvlistValue"`
	}
)

// uint64s is a 64-bit integer, which OTLP JSON writes as a string (a number is taken
// too). It holds the bits: an intValue is read back as int64.
type uint64s uint64

func (u *uint64s) UnmarshalJSON(b []byte) error {
	s := string(bytes.Trim(b, `"`))
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		*u = uint64s(n)
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not a 64-bit integer: %s", b)
	}
	*u = uint64s(n)
	return nil
}

func (u uint64s) time() time.Time {
	if u == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(u)).UTC()
}

// Parse reads the file exporter's OTLP JSON lines into spans, in the order written. A
// last line without its newline is still being written and is left out.
func Parse(data []byte) ([]Span, error) {
	var spans []Span
	for n := 1; len(data) > 0; n++ {
		line, rest, complete := bytes.Cut(data, []byte("\n"))
		if !complete {
			break
		}
		data = rest
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		for _, rs := range req.ResourceSpans {
			resource, err := attributes(rs.Resource.Attributes)
			if err != nil {
				return nil, fmt.Errorf("line %d: resource: %w", n, err)
			}
			for _, ss := range rs.ScopeSpans {
				for _, w := range ss.Spans {
					s, err := w.span(resource, ss.Scope.Name)
					if err != nil {
						return nil, fmt.Errorf("line %d: span %q: %w", n, w.Name, err)
					}
					spans = append(spans, s)
				}
			}
		}
	}
	return spans, nil
}

func (w wireSpan) span(resource map[string]any, scope string) (Span, error) {
	s := Span{
		TraceID: w.TraceID, SpanID: w.SpanID, ParentID: w.ParentSpanID, Name: w.Name,
		Kind: enum(kindNames, w.Kind), Start: w.Start.time(), End: w.End.time(),
		Status:   Status{Code: enum(statusCodes, w.Status.Code), Message: w.Status.Message},
		Resource: resource, Scope: scope,
	}
	var err error
	if s.Attributes, err = attributes(w.Attributes); err != nil {
		return Span{}, err
	}
	for _, e := range w.Events {
		attrs, err := attributes(e.Attributes)
		if err != nil {
			return Span{}, fmt.Errorf("event %q: %w", e.Name, err)
		}
		s.Events = append(s.Events, Event{Name: e.Name, Time: e.Time.time(), Attributes: attrs})
	}
	return s, nil
}

func enum(names []string, n int) string {
	if n >= 0 && n < len(names) {
		return names[n]
	}
	return strconv.Itoa(n)
}

func attributes(kvs []keyValue) (map[string]any, error) {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		v, err := kv.Value.value()
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", kv.Key, err)
		}
		m[kv.Key] = v
	}
	return m, nil
}

func (v anyValue) value() (any, error) {
	switch {
	case v.String != nil:
		return *v.String, nil
	case v.Bool != nil:
		return *v.Bool, nil
	case v.Int != nil:
		return int64(*v.Int), nil
	case v.Double != nil:
		return *v.Double, nil
	case v.Bytes != nil:
		return base64.StdEncoding.DecodeString(*v.Bytes)
	case v.Array != nil:
		out := make([]any, 0, len(v.Array.Values))
		for _, e := range v.Array.Values {
			x, err := e.value()
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	case v.KVList != nil:
		return attributes(v.KVList.Values)
	}
	return nil, nil // an empty value
}
