// SPDX-License-Identifier: GPL-2.0

//! The port's hardware counters (sysfs `ports/1/hw_counters`, `rdma
//! statistic`): the device's QUERY_COUNTERS (device.rst "Counters"), under
//! the names rxe gives the same counts where rxe has one.

#![forbid(unsafe_code)]

use crate::{
    bindings as hw,
    rdma::StatDesc, //
};

macro_rules! port_stats {
    ($($name:literal => $field:ident,)*) => {
        /// The counter names, in the order of [`values`].
        pub(crate) static PORT_STATS: [StatDesc; [$($name),*].len()] =
            [$(StatDesc::new($name)),*];

        /// Copies the counters of `c` into `out`, in the order of
        /// [`PORT_STATS`].
        pub(crate) fn values(c: &hw::ferroce_counters, out: &mut [u64]) {
            for (o, v) in out.iter_mut().zip([$(c.$field),*]) {
                *o = v;
            }
        }
    };
}

port_stats! {
    // rxe's names and meanings.
    c"sent_pkts" => tx_pkts,
    c"rcvd_pkts" => rx_pkts,
    c"sent_bytes" => tx_bytes,
    c"rcvd_bytes" => rx_bytes,
    c"duplicate_request" => dup_requests,
    c"out_of_seq_request" => seq_naks_sent,
    c"rcvd_rnr_err" => rnr_naks_rcvd,
    c"send_rnr_err" => rnr_naks_sent,
    c"rcvd_seq_err" => seq_naks_rcvd,
    c"ack_deferred" => responses_rcvd,
    c"retry_exceeded_err" => retry_exceeded,
    c"retry_rnr_exceeded_err" => rnr_retry_exceeded,
    c"completer_retry_err" => ack_retries,
    c"send_err" => tx_dropped,
    // ferroce's own.
    c"rcvd_icrc_err" => rx_bad_icrc,
    c"loopback_pkts" => loopback_pkts,
    c"retransmits" => retransmits,
    c"timeouts" => timeouts,
    c"acks_sent" => acks_sent,
    c"err_naks_sent" => err_naks_sent,
    c"stale_responses" => stale_responses,
    c"rx_truncated" => rx_truncated,
    c"rx_not_roce" => rx_not_roce,
    c"rx_bad_header" => rx_bad_header,
    c"rx_bad_bth" => rx_bad_bth,
    c"rx_no_qp" => rx_no_qp,
    c"rx_bad_key" => rx_bad_key,
    c"rx_bad_addr" => rx_bad_addr,
    c"rx_ud_no_wqe" => rx_ud_no_wqe,
    c"rx_uc_dropped" => rx_uc_dropped,
    c"rx_uc_seq_err" => rx_uc_seq_err,
    c"rx_uc_no_wqe" => rx_uc_no_wqe,
    c"rx_uc_bad_req" => rx_uc_bad_req,
    c"rx_stalled" => rx_stalled,
    c"credit_waits" => credit_waits,
    c"credit_updates" => credit_updates,
    c"credit_keepalives" => credit_keepalives,
    c"cqes" => cqes,
    c"cqe_errors" => cqe_errors,
    c"cqe_flushed" => cqe_flushed,
    c"dev_bad_dma" => bad_dma,
    c"dev_malformed_doorbells" => malformed_doorbells,
    c"dev_eq_overflows" => eq_overflows,
    c"dev_cmds_failed" => cmds_failed,
    c"dev_resets" => resets,
}
