package mcsd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/ferrofed/ferrofed/gateway/config"
)

// The cache file keeps the last accepted registry: members only, never a credential.
// It is written whole to a temporary file beside it, synced, and renamed over it, so
// that a crash leaves the old file or the new one, never half of one.

// cacheVersion is the file's format.
const cacheVersion = 1

// maxCacheBytes bounds what is read of the cache file (5,000 members fit many times).
const maxCacheBytes = 16 << 20

type cacheFile struct {
	Version int           `json:"version"`
	Saved   string        `json:"saved"`
	Members []cacheMember `json:"members"`
}

type cacheMember struct {
	ID            string `json:"id"`
	QueryEndpoint string `json:"query_endpoint"`
	EndpointID    string `json:"endpoint_id"`
	// IdentifierSystem and HomeCommunityID, when the directory gave them (and the
	// configuration read them).
	IdentifierSystem string `json:"identifier_system,omitempty"`
	HomeCommunityID  string `json:"home_community_id,omitempty"`
}

// saveCache keeps members in cache_file (when set).
func (d *Directory) saveCache(members []config.Member) error {
	path := d.table.CacheFile
	if path == "" {
		return nil
	}
	cf := cacheFile{Version: cacheVersion, Saved: d.now().UTC().Format(time.RFC3339Nano), Members: make([]cacheMember, len(members))}
	for i, m := range members {
		cf.Members[i] = cacheMember{ID: m.ID, QueryEndpoint: m.QueryEndpoint, EndpointID: m.EndpointID,
			IdentifierSystem: m.IdentifierSystem, HomeCommunityID: m.HomeCommunityID}
	}
	data, err := json.Marshal(cf)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename.
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if df, err := os.Open(dir); err == nil {
		df.Sync() //nolint:errcheck // the rename is done; a directory sync is best effort.
		df.Close()
	}
	return nil
}

// loadCache serves the registry of cache_file, when it holds one the configuration
// accepts; n is its members (0: none served).
func (d *Directory) loadCache() (n int, err error) {
	path := d.table.CacheFile
	if path == "" {
		return 0, nil
	}
	data, err := config.ReadFile("registry.mcsd.cache_file", path, maxCacheBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var cf cacheFile
	if err := json.Unmarshal(data, &cf); err != nil {
		return 0, fmt.Errorf("not a registry cache: %w", err)
	}
	if cf.Version != cacheVersion {
		return 0, fmt.Errorf("format %d, not %d", cf.Version, cacheVersion)
	}
	if len(cf.Members) > d.lim.MaxMembers {
		return 0, fmt.Errorf("%d members, more than %d", len(cf.Members), d.lim.MaxMembers)
	}
	// The keys are read as a refresh reads them: only those the configuration reads.
	cfg := d.cfg.Load()
	members := make([]config.Member, len(cf.Members))
	for i, m := range cf.Members {
		members[i] = config.Member{ID: m.ID, QueryEndpoint: m.QueryEndpoint, EndpointID: m.EndpointID}
		if cfg.UsesIdentifierSystem() {
			members[i].IdentifierSystem = m.IdentifierSystem
		}
		if cfg.UsesHomeCommunityID() {
			members[i].HomeCommunityID = m.HomeCommunityID
		}
	}
	if fault, why := d.swap(members); fault != "" {
		return 0, fmt.Errorf("refused (%s): %s", fault, why)
	}
	return len(members), nil
}
