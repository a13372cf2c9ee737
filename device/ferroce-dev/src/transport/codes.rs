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

/// An AETH syndrome: type in bits 7:5, value in bits 4:0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syndrome {
    /// ACK. ferroce uses no end-to-end credits: it sends the credit count
    /// "invalid" (0x1f, unlimited) and ignores the one it receives.
    Ack,
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
            aeth::ACK => Self::Ack,
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
            Self::Ack => aeth::ACK_UNLIMITED,
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
            // Received ACK credits are ignored; everything else survives.
            if byte & aeth::TYPE_MASK == aeth::ACK {
                assert_eq!(syndrome, Syndrome::Ack);
            } else {
                assert_eq!(syndrome.to_wire(), byte, "{byte:#x}");
            }
        }
    }
}
