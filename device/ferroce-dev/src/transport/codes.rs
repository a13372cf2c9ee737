// SPDX-License-Identifier: GPL-2.0
//! Completion statuses and AETH syndromes with their IBTA names. This is
//! the one place where they become the values of `ferroce-hw.h` (CQE
//! status) and of the wire (AETH syndrome, IBTA 9.3.5).

use crate::hw;
use crate::wire::aeth;

/// Status of a data path CQE: the `FERROCE_WC_*` statuses the engine
/// produces (named as `ib_wc_status`, IBTA 11.6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WcStatus {
    /// The work request completed.
    Success,
    /// The message does not fit (local length error).
    LocLenErr,
    /// A malformed or unsupported WQE (local QP operation error).
    LocQpOpErr,
    /// A local key, right or page refused (local protection error).
    LocProtErr,
    /// A BIND_MW WQE refused (memory window bind error, 1.7).
    MwBindErr,
    /// Flushed: the QP is in SQE or ERR.
    WrFlushErr,
    /// The responder NAKed invalid request.
    RemInvReqErr,
    /// The responder NAKed remote access error.
    RemAccessErr,
    /// The responder NAKed remote operational error.
    RemOpErr,
    /// Transport retries (timeouts, PSN sequence NAKs) exhausted.
    RetryExcErr,
    /// RNR retries exhausted.
    RnrRetryExcErr,
}

impl WcStatus {
    /// The `FERROCE_WC_*` value written into the CQE.
    pub(crate) const fn to_hw(self) -> u8 {
        match self {
            Self::Success => hw::WC_SUCCESS,
            Self::LocLenErr => hw::WC_LOC_LEN_ERR,
            Self::LocQpOpErr => hw::WC_LOC_QP_OP_ERR,
            Self::LocProtErr => hw::WC_LOC_PROT_ERR,
            Self::MwBindErr => hw::WC_MW_BIND_ERR,
            Self::WrFlushErr => hw::WC_WR_FLUSH_ERR,
            Self::RemInvReqErr => hw::WC_REM_INV_REQ_ERR,
            Self::RemAccessErr => hw::WC_REM_ACCESS_ERR,
            Self::RemOpErr => hw::WC_REM_OP_ERR,
            Self::RetryExcErr => hw::WC_RETRY_EXC_ERR,
            Self::RnrRetryExcErr => hw::WC_RNR_RETRY_EXC_ERR,
        }
    }
}

/// The NAK codes of an AETH syndrome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NakCode {
    /// PSN sequence error: the requester retransmits from the NAK's PSN.
    PsnSeqErr,
    /// Invalid request.
    InvalidRequest,
    /// Remote access error.
    RemoteAccessErr,
    /// Remote operational error.
    RemoteOpErr,
    /// Invalid RD request or a reserved code: taken as a remote
    /// operational error, as rxe does.
    Other(u8),
}

impl NakCode {
    /// The status the requester completes the NAKed WQE with; None for a
    /// PSN sequence error, which is retried instead.
    pub(crate) const fn completion_status(self) -> Option<WcStatus> {
        match self {
            Self::PsnSeqErr => None,
            Self::InvalidRequest => Some(WcStatus::RemInvReqErr),
            Self::RemoteAccessErr => Some(WcStatus::RemAccessErr),
            Self::RemoteOpErr | Self::Other(_) => Some(WcStatus::RemOpErr),
        }
    }
}

/// The credit count of an ACK's AETH (IBTA 9.7.7.2, device.rst "RC
/// responder"): a 5-bit code for the receive WQEs the responder has
/// posted, or [`Credit::UNLIMITED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Credit(u8);

impl Credit {
    /// Code 0x1F, "invalid": the requester is not limited (an SRQ's QPs,
    /// rxe).
    pub(crate) const UNLIMITED: Self = Self(0x1f);

    /// The receive WQEs that codes 0 to 0x1E stand for.
    const WQES: [u32; 31] = [
        0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
        2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
    ];

    /// The largest code that stands for no more than `wqes` WQEs.
    pub(crate) fn of_wqes(wqes: u32) -> Self {
        let code = Self::WQES.partition_point(|&n| n <= wqes).saturating_sub(1);
        // At most 30: the table has 31 entries.
        Self(code as u8)
    }

    /// The WQEs this code stands for; `None` for [`Credit::UNLIMITED`].
    pub(crate) fn wqes(self) -> Option<u32> {
        Self::WQES.get(usize::from(self.0)).copied()
    }
}

/// An AETH syndrome: type in bits 7:5, value in bits 4:0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syndrome {
    /// ACK with the responder's credit count.
    Ack(Credit),
    /// RNR NAK with its 5-bit RNR timer code (IBTA table 45).
    RnrNak(u8),
    /// NAK.
    Nak(NakCode),
    /// A reserved syndrome type.
    Reserved(u8),
}

impl Syndrome {
    /// The syndrome of a received AETH.
    pub(crate) const fn from_wire(syndrome: u8) -> Self {
        match syndrome & aeth::TYPE_MASK {
            aeth::ACK => Self::Ack(Credit(syndrome & 0x1f)),
            aeth::RNR_NAK => Self::RnrNak(syndrome & 0x1f),
            aeth::NAK => Self::Nak(match syndrome {
                aeth::NAK_PSN_SEQ => NakCode::PsnSeqErr,
                aeth::NAK_INVALID_REQ => NakCode::InvalidRequest,
                aeth::NAK_REM_ACCESS => NakCode::RemoteAccessErr,
                aeth::NAK_REM_OP => NakCode::RemoteOpErr,
                other => NakCode::Other(other & 0x1f),
            }),
            _ => Self::Reserved(syndrome),
        }
    }

    /// The AETH syndrome byte.
    pub(crate) const fn to_wire(self) -> u8 {
        match self {
            Self::Ack(Credit(code)) => aeth::ACK | (code & 0x1f),
            Self::RnrNak(timer) => aeth::RNR_NAK | (timer & 0x1f),
            Self::Nak(code) => match code {
                NakCode::PsnSeqErr => aeth::NAK_PSN_SEQ,
                NakCode::InvalidRequest => aeth::NAK_INVALID_REQ,
                NakCode::RemoteAccessErr => aeth::NAK_REM_ACCESS,
                NakCode::RemoteOpErr => aeth::NAK_REM_OP,
                NakCode::Other(code) => aeth::NAK | (code & 0x1f),
            },
            Self::Reserved(syndrome) => syndrome,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syndromes_round_trip() {
        for byte in 0..=u8::MAX {
            let syndrome = Syndrome::from_wire(byte);
            assert_eq!(syndrome.to_wire(), byte, "{byte:#x}");
            let ack = byte & aeth::TYPE_MASK == aeth::ACK;
            assert_eq!(matches!(syndrome, Syndrome::Ack(_)), ack, "{byte:#x}");
        }
        assert_eq!(
            Syndrome::Ack(Credit::UNLIMITED).to_wire(),
            aeth::ACK_UNLIMITED
        );
    }

    #[test]
    fn credit_codes() {
        // IBTA's table: 0-4 exact, then 1.5 and 2 times powers of two.
        for code in 0..=30u8 {
            let n = Credit::WQES[usize::from(code)];
            assert_eq!(Credit(code).wqes(), Some(n));
            let want = match code {
                0..=4 => u32::from(code),
                _ => (2 + u32::from(code & 1)) << ((code - 2) / 2),
            };
            assert_eq!(n, want, "code {code}");
            assert_eq!(Credit::of_wqes(n), Credit(code));
            if n > 0 {
                // One WQE short of a code's count rounds down to the code below.
                assert_eq!(Credit::of_wqes(n - 1), Credit(code - 1), "{n}");
            }
        }
        assert_eq!(Credit::UNLIMITED.wqes(), None);
        assert_eq!(Credit::of_wqes(5), Credit(4));
        assert_eq!(Credit::of_wqes(32767), Credit(29));
        assert_eq!(Credit::of_wqes(u32::MAX), Credit(30));
    }
}
