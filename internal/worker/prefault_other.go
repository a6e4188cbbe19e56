//go:build !linux

package worker

import "errors"

// Outside Linux the pages a first call touches are not learned, and spares
// fault theirs on first use.

func touchedPages([]byte) (pageRuns, error) {
	return pageRuns{}, errors.New("no pagemap outside Linux")
}

func prefault([]byte, pageRuns) {}
