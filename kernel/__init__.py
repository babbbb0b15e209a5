"""The kernel: what every layer shares, below all of them (it imports nothing of Lookout's).

The one outbound message and the contract of a platform's sender (`outbound`), the one retry rule (`retry`), error
ids and their one wording (`error_ids`), the clock (`clock`), whether a process still runs (`processes`). Every
package imports these names from here, and only from here: no other face re-exports them. Importing it is cheap
(pydantic and tenacity, nothing heavy), so the face is eager.
"""

from kernel.clock import Clock, utc_now
from kernel.error_ids import apology, error_reference, new_error_id
from kernel.outbound import (
    CALLBACK_DATA_MAX_BYTES,
    MAX_BUTTONS,
    AddressedSender,
    Attachment,
    AttachmentKind,
    Button,
    ChatGone,
    ChatMoved,
    ChatSender,
    DeliveryError,
    ProgressSink,
    ProgressUpdate,
    Purpose,
    Recipient,
    Reply,
    RetryLater,
)
from kernel.processes import THIS_HOST, process_runs
from kernel.retry import Backoff, Sleep, parse_retry_after

__all__ = [
    "CALLBACK_DATA_MAX_BYTES",
    "MAX_BUTTONS",
    "THIS_HOST",
    "AddressedSender",
    "Attachment",
    "AttachmentKind",
    "Backoff",
    "Button",
    "ChatGone",
    "ChatMoved",
    "ChatSender",
    "Clock",
    "DeliveryError",
    "ProgressSink",
    "ProgressUpdate",
    "Purpose",
    "Recipient",
    "Reply",
    "RetryLater",
    "Sleep",
    "apology",
    "error_reference",
    "new_error_id",
    "parse_retry_after",
    "process_runs",
    "utc_now",
]
