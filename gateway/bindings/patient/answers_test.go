package patient_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/ferrofed/ferrofed/gateway/federation"
	"github.com/ferrofed/ferrofed/gateway/fhir"
	"github.com/ferrofed/ferrofed/test/doubles/members/fhirschema"
)

// answer is what a test reads of a search's answer.
type answer struct {
	status int
	raw    []byte
	Bundle struct {
		ResourceType string `json:"resourceType"`
		Total        *int   `json:"total"`
		Meta         struct {
			Federation []federation.Record `json:"federation"`
			Extension  []struct {
				Extension []struct {
					URL         string `json:"url"`
					ValueString string `json:"valueString"`
					ValueCode   string `json:"valueCode"`
				} `json:"extension"`
			} `json:"extension"`
		} `json:"meta"`
		Issue []fhir.Issue `json:"issue"`
		Entry []struct {
			Resource struct {
				ResourceType string       `json:"resourceType"`
				Issue        []fhir.Issue `json:"issue"`
			} `json:"resource"`
		} `json:"entry"`
	}
}

// search asks the gateway GET {base}/fhir/{path} as its data-plane client holding the
// operator scope too (gateway.operator): the answer carries every record.
func (g *gateway) search(path string) answer {
	g.t.Helper()
	return g.searchAs(path, g.operator)
}

// searchAs asks as the holder of token ("" for none).
func (g *gateway) searchAs(path, token string) answer {
	g.t.Helper()
	res, raw := g.Request(http.MethodGet, "/fhir/"+path, token, nil)
	a := answer{status: res.StatusCode, raw: raw}
	if err := json.Unmarshal(raw, &a.Bundle); err != nil {
		g.t.Fatalf("GET %s answered %d, not JSON: %s", path, res.StatusCode, raw)
	}
	// Every answer is R4 (but for meta.federation): the excluded records' extension,
	// the flow's outcome entries and its refusals included. A benchmark does not
	// validate: the figure is the gateway's cost.
	if _, bench := g.t.(*testing.B); bench {
		return a
	}
	if err := fhirschema.ValidateFederated(raw); err != nil {
		g.t.Fatalf("GET %s answered %d, not valid R4: %v\n%.1000s", path, res.StatusCode, err, raw)
	}
	return a
}

// record is the meta.federation record of member id, and whether there is one.
func (a answer) record(id string) (federation.Record, bool) {
	for _, r := range a.Bundle.Meta.Federation {
		if r.ID == id {
			return r, true
		}
	}
	return federation.Record{}, false
}

// excludedBy is the excluded_by of member id's record in the extension.
func (a answer) extensionExcludedBy(id string) string {
	for _, e := range a.Bundle.Meta.Extension {
		var member, by string
		for _, sub := range e.Extension {
			switch sub.URL {
			case "member":
				member = sub.ValueString
			case "excluded_by":
				by = sub.ValueCode
			}
		}
		if member == id {
			return by
		}
	}
	return ""
}

// asked is how many requests each member received.
func (g *gateway) asked() map[string]int64 {
	out := map[string]int64{}
	for id, m := range g.members {
		out[id] = int64(m.Requests())
	}
	return out
}

// lastQuery is the query member id was last asked, decoded.
func (g *gateway) lastQuery(id string) url.Values {
	q, _ := url.ParseQuery(g.members[id].LastRequest().RawQuery)
	return q
}
