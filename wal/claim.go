package wal

import (
	"context"
	"errors"
	"fmt"

	"github.com/objwal/objwal/casstore"
	"github.com/objwal/objwal/format"
)

// claim makes this producer the log's writer: it writes the manifest back
// with the next epoch (FORMATS.md §4.6, §10), create-only when there is no
// manifest and IfMatch otherwise, and returns what it wrote.
//
// A lost race means someone else wrote the manifest in between. If the
// epoch moved, a concurrent claim won and this one returns ErrFenced; if
// not, an old producer committed (it is about to be fenced) and the claim
// tries again. A claim whose reply was lost is never assumed to have
// landed: another claimer may have written the very same bytes, so the
// producer claims again on top of whatever it finds.
func (p *Producer) claim(ctx context.Context) (loadedManifest, error) {
	key := p.cfg.ManifestPath
	bo := newBackoff(p.cfg.RetryWindow)
	var seen uint64
	first := true
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			p.met.claimRetries.Add(context.Background(), 1)
		}
		lm, err := loadManifest(ctx, p.store, key, p.cfg.RequestTimeout)
		if err != nil {
			if transient(err) && bo.wait(ctx) {
				continue
			}
			p.met.claimCount.Add(context.Background(), 1, outcome("error"))
			return loadedManifest{}, claimErr(err)
		}
		if lm.exists && lm.m.Version() == format.ManifestV1 && !p.cfg.AllowManifestUpgrade {
			p.met.claimCount.Add(context.Background(), 1, outcome("error"))
			return loadedManifest{}, fmt.Errorf("%w: manifest %q", ErrLegacyManifest, key)
		}
		if first {
			seen, first = lm.m.Epoch(), false
		} else if lm.m.Epoch() != seen {
			p.met.claimCount.Add(context.Background(), 1, outcome("fenced"))
			return loadedManifest{}, newFenced(key, format.NextEpoch(seen), lm.m.Epoch())
		}
		next := lm.m.Clone()
		next.SetEpoch(format.NextEpoch(lm.m.Epoch()))
		cond := casstore.IfAbsent()
		if lm.exists {
			cond = casstore.IfMatch(lm.version)
		}
		v, err := putObject(ctx, p.store, key, next.Encode(), cond, p.cfg.RequestTimeout)
		switch {
		case err == nil:
			p.met.claimCount.Add(context.Background(), 1, outcome("ok"))
			return loadedManifest{m: next, version: v, exists: true}, nil
		case errors.Is(err, casstore.ErrPreconditionFailed), errors.Is(err, casstore.ErrAlreadyExists):
			continue // someone wrote in between: reload and look at the epoch
		case transient(err) && bo.wait(ctx):
			if !errors.Is(err, casstore.ErrConflict) {
				first = true // outcome unknown: claim again on top of whatever is there
			}
			p.log.Warn("wal: claim failed, retrying", "manifest", key, "err", err)
			continue
		default:
			p.met.claimCount.Add(context.Background(), 1, outcome("error"))
			return loadedManifest{}, claimErr(err)
		}
	}
}

func claimErr(err error) error {
	return fmt.Errorf("wal: claim: %w", err)
}
