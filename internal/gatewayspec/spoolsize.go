package gatewayspec

import (
	"fmt"

	ferrofedv1alpha1 "github.com/ferrofed/ferrofed/api/v1alpha1"
	"github.com/ferrofed/ferrofed/gateway/config"
)

// The headroom a persistent spool claim needs beyond config.RequiredSpoolBytes for its
// file system's own use (docs/audit-spool.md, "Sizing"): an eighth of the spools' bytes
// for what grows with the volume (ext4's inode tables and the 5 % of blocks mke2fs
// keeps for root by default, XFS's per-group reservations), and 64 MiB for what does
// not (an XFS log, an ext4 journal below 16 GiB, the reserves both kernels keep back
// from every writer). An emptyDir gets none: its sizeLimit is what the kubelet lets the
// volume's files use, on a file system that is not the volume's own.
const (
	ClaimOverheadDivisor    = 8
	ClaimOverheadFixedBytes = 64 << 20
)

// ClaimOverheadBytes is the headroom a claim holding spoolBytes of spools needs for its
// file system: spoolBytes/8 + 64 MiB, none without a spool.
func ClaimOverheadBytes(spoolBytes int64) int64 {
	if spoolBytes <= 0 {
		return 0
	}
	return spoolBytes/ClaimOverheadDivisor + ClaimOverheadFixedBytes
}

// SpoolClaimBytes is the storage a persistent spool claim must request for cfg's spools:
// config.RequiredSpoolBytes(cfg) and its ClaimOverheadBytes; 0 without a spool.
func SpoolClaimBytes(cfg *config.Config) int64 {
	need := config.RequiredSpoolBytes(cfg)
	return need + ClaimOverheadBytes(need)
}

// maxSpoolBytesFitting is the largest audit.max_spool_bytes whose spools a claim of
// storage bytes holds with its headroom, or 0 when none does.
func maxSpoolBytesFitting(storage int64, spools int) int64 {
	room := storage - ClaimOverheadFixedBytes
	if room <= 0 || spools <= 0 {
		return 0
	}
	// x + x/8 <= room: start from a bound below the largest x, then step up to it.
	x := room / (ClaimOverheadDivisor + 1) * ClaimOverheadDivisor
	for next := x + 1; next+next/ClaimOverheadDivisor <= room; next++ {
		x = next
	}
	return x / int64(spools)
}

// spoolProblems refuses an audit.max_spool_bytes whose spools do not fit the spool
// volume: the emptyDir's sizeLimit, or the claim's requested storage less its file
// system's headroom (SpoolClaimBytes).
func spoolProblems(s *ferrofedv1alpha1.GatewaySpec, cfg *config.Config) error {
	spoolBytes := config.RequiredSpoolBytes(cfg)
	if spoolBytes == 0 {
		return nil
	}
	var msg string
	if s.PersistentSpool() {
		msg = claimProblem(s, cfg, spoolBytes)
	} else if limit := s.SpoolSizeLimit(); spoolBytes > limit.Value() {
		const name = "spec.audit.spool.sizeLimit"
		msg = fmt.Sprintf("audit.max_spool_bytes (%d) × %d spool(s) is %d bytes, more than %s (%s, %d bytes): lower audit.max_spool_bytes or raise %s",
			cfg.Audit.SpoolBytes(), cfg.Audit.Spools(), spoolBytes, name, limit.String(), limit.Value(), name)
	}
	if msg == "" {
		return nil
	}
	return &config.Problems{Source: "rendered ferrofed.toml", List: []config.Problem{{Key: "audit.max_spool_bytes", Message: msg}}}
}

// claimProblem is what is wrong with a claim's requested storage for spoolBytes of
// spools, or "": it must hold them and their file system's headroom.
func claimProblem(s *ferrofedv1alpha1.GatewaySpec, cfg *config.Config, spoolBytes int64) string {
	const name = "spec.audit.spool.volumeClaimTemplate.spec.resources.requests.storage"
	storage, _ := s.SpoolClaimStorage() // required by admission; zero when absent
	need := SpoolClaimBytes(cfg)
	overhead := need - spoolBytes
	if need <= storage.Value() {
		return ""
	}
	msg := fmt.Sprintf("audit.max_spool_bytes (%d) × %d spool(s) is %d bytes; with %d bytes for the claim's own file system "+
		"(an eighth of that and 64 MiB: its journal or log, inode tables, reserved blocks) the claim needs %d bytes, more than %s (%s, %d bytes): "+
		"raise %s to at least %dMi",
		cfg.Audit.SpoolBytes(), cfg.Audit.Spools(), spoolBytes, overhead, need, name, storage.String(), storage.Value(), name, (need+(1<<20)-1)>>20)
	if fit := maxSpoolBytesFitting(storage.Value(), cfg.Audit.Spools()); fit >= config.MinMaxSpoolBytes {
		msg += fmt.Sprintf(", or lower audit.max_spool_bytes to at most %d", fit)
	}
	return msg
}
