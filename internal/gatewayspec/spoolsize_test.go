package gatewayspec

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/config"
)

const mib = 1 << 20

// auditConfig is an [audit] table of destination with a cap (the default when 0) and,
// with feed, an [audit.feed].
func auditConfig(destination string, capBytes int64, feed bool) *config.Config {
	a := &config.Audit{Destination: destination}
	if capBytes != 0 {
		a.MaxSpoolBytes = ptr.To(capBytes)
	}
	if feed {
		a.Feed = &config.AuditFeed{}
	}
	return &config.Config{Audit: a}
}

// TestSpoolClaimBytes: a claim holds config.RequiredSpoolBytes and, for its file
// system, an eighth of it and 64 MiB (docs/audit-spool.md, "Sizing").
func TestSpoolClaimBytes(t *testing.T) {
	for _, c := range []struct {
		name          string
		cfg           *config.Config
		overhead, all int64
	}{
		{"no configuration", nil, 0, 0},
		{"no [audit]", &config.Config{}, 0, 0},
		{"destination log", auditConfig(config.AuditToLog, 0, false), 0, 0},
		{"one spool, the default 256 MiB", auditConfig(config.AuditToRepository, 0, false), 32*mib + 64*mib, 352 * mib},
		{"one spool of the smallest cap", auditConfig(config.AuditToRepository, config.MinMaxSpoolBytes, false), mib/2 + 64*mib, 4*mib + mib/2 + 64*mib},
		{"two spools of 128 MiB", auditConfig(config.AuditToRepository, 128*mib, true), 32*mib + 64*mib, 352 * mib},
		{"two spools of the default", auditConfig(config.AuditToRepository, 0, true), 64*mib + 64*mib, 640 * mib},
		{"two spools of 64 GiB", auditConfig(config.AuditToRepository, config.MaxMaxSpoolBytes, true), 16<<30 + 64*mib, 144<<30 + 64*mib},
	} {
		t.Run(c.name, func(t *testing.T) {
			spools := config.RequiredSpoolBytes(c.cfg)
			if got := ClaimOverheadBytes(spools); got != c.overhead {
				t.Errorf("ClaimOverheadBytes(%d) = %d, want %d", spools, got, c.overhead)
			}
			if got := SpoolClaimBytes(c.cfg); got != c.all {
				t.Errorf("SpoolClaimBytes = %d, want %d", got, c.all)
			}
		})
	}
}

// TestMaxSpoolBytesFitting: the cap a refusal proposes is the largest whose claim need
// the storage holds.
func TestMaxSpoolBytesFitting(t *testing.T) {
	need := func(capBytes int64, spools int) int64 {
		n := capBytes * int64(spools)
		return n + ClaimOverheadBytes(n)
	}
	for _, storage := range []int64{4 * mib, 64 * mib, 64*mib + 1, 65 * mib, 352*mib - 1, 352 * mib, 352*mib + 1, 1 << 30, 128 << 30} {
		for _, spools := range []int{1, 2} {
			fit := maxSpoolBytesFitting(storage, spools)
			if fit > 0 && need(fit, spools) > storage {
				t.Errorf("storage %d, %d spool(s): %d does not fit", storage, spools, fit)
			}
			if need(fit+1, spools) <= storage {
				t.Errorf("storage %d, %d spool(s): %d fits too, more than %d", storage, spools, fit+1, fit)
			}
		}
	}
	if got := maxSpoolBytesFitting(352*mib, 2); got != 128*mib {
		t.Errorf("352Mi, two spools: %d, want 128 MiB", got)
	}
}

// TestSpoolProblems: the emptyDir holds exactly RequiredSpoolBytes; a claim that and
// its file system's headroom, to the byte; a refusal names both fields, the numbers
// and what to set.
func TestSpoolProblems(t *testing.T) {
	claim := func(storage string) *ferrofedv1alpha1.GatewaySpec {
		return &ferrofedv1alpha1.GatewaySpec{Audit: claimTemplate(storage, corev1.ReadWriteOnce)}
	}
	emptyDir := func(limit string) *ferrofedv1alpha1.GatewaySpec {
		return &ferrofedv1alpha1.GatewaySpec{Audit: &ferrofedv1alpha1.Audit{Spool: &ferrofedv1alpha1.AuditSpool{SizeLimit: ptr.To(resource.MustParse(limit))}}}
	}
	one, two := auditConfig(config.AuditToRepository, 0, false), auditConfig(config.AuditToRepository, 128*mib, true)
	tests := []struct {
		name    string
		spec    *ferrofedv1alpha1.GatewaySpec
		cfg     *config.Config
		want    []string // every piece the refusal says; none: admitted
		notWant string
	}{
		{"no spool, the smallest claim", claim("4Mi"), auditConfig(config.AuditToLog, 0, false), nil, ""},
		{"one spool, an emptyDir of exactly 256Mi", emptyDir("256Mi"), one, nil, ""},
		{"one spool, an emptyDir of a byte less", emptyDir("268435455"), one, []string{
			"audit.max_spool_bytes (268435456) × 1 spool(s) is 268435456 bytes, more than spec.audit.spool.sizeLimit (268435455, 268435455 bytes)"}, ""},
		{"one spool, a claim of 256Mi", claim("256Mi"), one, []string{"the claim needs 369098752 bytes", "to at least 352Mi", "lower audit.max_spool_bytes to at most 178956971"}, ""},
		{"one spool, a claim of exactly 352Mi", claim("352Mi"), one, nil, ""},
		{"two spools, a claim of exactly 352Mi", claim("352Mi"), two, nil, ""},
		{"two spools, a claim of a byte less", claim("369098751"), two, []string{
			"audit.max_spool_bytes (134217728) × 2 spool(s) is 268435456 bytes; with 100663296 bytes for the claim's own file system",
			"the claim needs 369098752 bytes, more than spec.audit.spool.volumeClaimTemplate.spec.resources.requests.storage (369098751, 369098751 bytes)",
			"raise spec.audit.spool.volumeClaimTemplate.spec.resources.requests.storage to at least 352Mi",
			"or lower audit.max_spool_bytes to at most 134217727"}, ""},
		{"two spools, a claim too small for any cap", claim("64Mi"), two, []string{"to at least 352Mi"}, "lower audit.max_spool_bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := spoolProblems(tt.spec, tt.cfg)
			if (err != nil) != (len(tt.want) > 0) {
				t.Fatalf("spoolProblems = %v, want refusal saying %q", err, tt.want)
			}
			if err == nil {
				return
			}
			msg := ConfigMessage(err)
			for _, w := range append(tt.want, "audit.max_spool_bytes: ") {
				if !strings.Contains(msg, w) {
					t.Errorf("refusal %q does not say %q", msg, w)
				}
			}
			if tt.notWant != "" && strings.Contains(msg, tt.notWant) {
				t.Errorf("refusal %q says %q", msg, tt.notWant)
			}
		})
	}
}
