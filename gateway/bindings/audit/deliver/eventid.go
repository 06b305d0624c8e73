package deliver

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// EventIDSystem is the meta.tag system of the stable event id stamped on every
// AuditEvent before it is spooled: {"system": EventIDSystem, "code": "<uuid>"}.
// AuditEvent has no identifier and its id is the repository's to assign, so this tag
// is what lets a repository (or its reader) tell a redelivered event from a new one:
// delivery is at-least-once, and a crash or a lost answer sends the same bytes again.
// A tag is searchable on every FHIR server (`_tag=<system>|<uuid>`), which an
// extension is not.
const EventIDSystem = "https://ferrofed.io/fhir/audit-event-id"

// NewEventID is a random (version 4) UUID.
func NewEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], b[10:16])
	return string(out[:])
}

// StampEventID returns the AuditEvent with its event id tag set to id (replacing
// one already there).
func StampEventID(event []byte, id string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(event))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("stamp event id: %w", err)
	}
	if m["resourceType"] != "AuditEvent" {
		return nil, errors.New("stamp event id: not an AuditEvent")
	}
	meta, _ := m["meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	var tags []any
	if old, ok := meta["tag"].([]any); ok {
		for _, t := range old {
			if c, ok := t.(map[string]any); ok && c["system"] == EventIDSystem {
				continue
			}
			tags = append(tags, t)
		}
	}
	meta["tag"] = append(tags, map[string]any{"system": EventIDSystem, "code": id})
	m["meta"] = meta
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("stamp event id: %w", err)
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// EventID reads the event id tag back; ok is false when there is none.
func EventID(event []byte) (string, bool) {
	var e struct {
		Meta struct {
			Tag []struct {
				System string `json:"system"`
				Code   string `json:"code"`
			} `json:"tag"`
		} `json:"meta"`
	}
	if json.Unmarshal(event, &e) != nil {
		return "", false
	}
	for _, t := range e.Meta.Tag {
		if t.System == EventIDSystem && t.Code != "" {
			return t.Code, true
		}
	}
	return "", false
}
