package mcsd

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// The parts of FHIR R4 JSON the directory reads. Everything else in an answer is
// skipped by the decoder, never kept.

type bundle struct {
	ResourceType string `json:"resourceType"`
	Type         string `json:"type"`
	Meta         struct {
		LastUpdated string `json:"lastUpdated"`
	} `json:"meta"`
	Link  []link  `json:"link"`
	Entry []entry `json:"entry"`
}

type link struct {
	Relation string `json:"relation"`
	URL      string `json:"url"`
}

type entry struct {
	Resource *resource `json:"resource"`
	Request  *struct {
		Method string `json:"method"`
		URL    string `json:"url"`
	} `json:"request"`
}

// resource is an Organization or an Endpoint, the fields of both in one struct.
type resource struct {
	ResourceType string `json:"resourceType"`
	ID           string `json:"id"`
	// Organization
	Active     *bool        `json:"active"`
	Identifier []identifier `json:"identifier"`
	Endpoint   []reference  `json:"endpoint"`
	// Endpoint (R4: connectionType is one Coding)
	Status         string `json:"status"`
	ConnectionType coding `json:"connectionType"`
	Address        string `json:"address"`
}

type identifier struct {
	Type *struct {
		Coding []coding `json:"coding"`
	} `json:"type"`
	System string `json:"system"`
	Value  string `json:"value"`
}

// typed reports whether the identifier's type carries the coding system#code.
func (i identifier) typed(system, code string) bool {
	if i.Type == nil {
		return false
	}
	for _, c := range i.Type.Coding {
		if c.System == system && c.Code == code {
			return true
		}
	}
	return false
}

type reference struct {
	Reference string `json:"reference"`
}

type coding struct {
	System string `json:"system"`
	Code   string `json:"code"`
}

// The Endpoint a member is queried at: a FHIR REST endpoint, active.
const (
	connectionTypeSystem = "http://terminology.hl7.org/CodeSystem/endpoint-connection-type"
	connectionTypeFHIR   = "hl7-fhir-rest"
)

// The type of the Endpoint identifier that is a home community id (the mCSD guide's
// MCSDEndpointIdentifierTypes#HCID).
const (
	identifierTypeSystem = "https://profiles.ihe.net/ITI/mCSD/CodeSystem/MCSDEndpointIdentifierTypes"
	identifierTypeHCID   = "HCID"
)

// next is the bundle's next link, "" at the last page.
func (b *bundle) next() string {
	for _, l := range b.Link {
		if l.Relation == "next" {
			return l.URL
		}
	}
	return ""
}

// decodeBundle reads one page, refusing anything but a Bundle of the given type.
func decodeBundle(body []byte, wantType string) (*bundle, error) {
	var b bundle
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("not FHIR JSON: %w", err)
	}
	if b.ResourceType != "Bundle" {
		return nil, fmt.Errorf("a %q, not a Bundle", b.ResourceType)
	}
	if b.Type != wantType {
		return nil, fmt.Errorf("a %q Bundle, not a %s", b.Type, wantType)
	}
	return &b, nil
}

// typeAndID reads "Type/id", "Type/id/_history/v" or an absolute URL ending in one
// of them; ok is false for anything else.
func typeAndID(ref string) (typ, id string, ok bool) {
	if u, err := url.Parse(ref); err == nil && u.Scheme != "" {
		ref = u.Path
	}
	ref = strings.Trim(ref, "/")
	parts := strings.Split(ref, "/")
	if n := len(parts); n >= 4 && parts[n-2] == "_history" {
		parts = parts[:n-2]
	}
	n := len(parts)
	if n < 2 || parts[n-1] == "" || parts[n-2] == "" {
		return "", "", false
	}
	return parts[n-2], parts[n-1], true
}
