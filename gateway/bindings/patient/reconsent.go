package patient

import (
	"context"
	"time"

	"github.com/ferrofed/ferrofed/gateway/bindings/authzen"
)

// Consented is the question the consent pre-filter answered for a search's first
// page: the patient (by the identifier it was asked about) and the type; Until is
// when the answer stops being relied on.
type Consented struct {
	ResourceType, System, Value string
	Until                       time.Time
}

// Reconsent asks the consent pre-filter again, for a next page whose first page's
// decision is past its Until (docs/bindings.md, "Every door asks the same
// questions"): the members still paged that consent now permits, and the question
// with its new Until. A failure fails closed (its *bindings.Failure).
func (f *Flow) Reconsent(ctx context.Context, issuer, subject string, c Consented, members []string) (map[string]bool, Consented, error) {
	if f.consent == nil || len(members) == 0 {
		permitted := make(map[string]bool, len(members))
		for _, m := range members {
			permitted[m] = true
		}
		return permitted, c, nil
	}
	permitted, err := f.consent.Evaluate(ctx, authzen.Request{Issuer: issuer, Subject: subject, PatientSystem: c.System,
		PatientValue: c.Value, ResourceType: c.ResourceType, Members: members})
	if err != nil {
		return nil, c, err
	}
	c.Until = time.Now().Add(f.consentTTL)
	return permitted, c, nil
}
