package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/htqueue/htq/internal/embedded"
)

// newRecoverCmd is `htq recover SRC DST`: copy what can still be read from
// an embedded data directory that Open refuses as damaged into a new one.
func newRecoverCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "recover SRC DST",
		Short: "Copy what can be read from a damaged embedded data directory into a new one",
		Long: `recover reads the embedded store in directory SRC (for example ./htq-data, when
htq serve refuses it as damaged) and writes every task, queue setting, counter and
record it can still read into the new directory DST, skipping damaged pages. Then
replace SRC with DST and start again. The write-ahead log's records newer than the
data file are replayed into DST up to the first damaged one. Tasks on damaged pages
are lost; the report
says how many ranges were skipped. Neither directory may be in use. On a healthy
directory it compacts the data file to the size of the live data.`,
		Example: "  htq recover ./htq-data ./htq-data.recovered",
		Args:    wantArgs("SRC", "DST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			src := strings.TrimPrefix(args[0], "file:")
			dst := strings.TrimPrefix(args[1], "file:")
			rep, err := embedded.Salvage(context.Background(), src, dst)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "recovered %d tasks into %s; %d undecodable records left behind; %d damaged page ranges skipped\n",
				rep.Tasks, dst, rep.BadRecords, rep.DamagedRanges)
			if rep.LogRecords > 0 {
				fmt.Fprintf(stdout, "replayed %d records of the write-ahead log written after the data file's last checkpoint\n", rep.LogRecords)
			}
			if len(rep.Lost) > 0 {
				fmt.Fprintf(stdout, "could not read: %s\n", strings.Join(rep.Lost, ", "))
			}
			return nil
		},
	}
}
