"""Repositories: one small class per aggregate, each method one transaction, returning records."""

from storage.repositories.alerts import AlertRepository
from storage.repositories.briefings import BriefingClaim, BriefingRepository
from storage.repositories.chats import ChatChanges, ChatRepository
from storage.repositories.conversations import ConversationRepository
from storage.repositories.deliveries import DeliveryRepository
from storage.repositories.destinations import DestinationRecord, DestinationRepository
from storage.repositories.digest_pages import DigestPageRepository
from storage.repositories.embeddings import EmbeddingRepository
from storage.repositories.feed_tokens import FeedSubject, FeedTokenRepository
from storage.repositories.feedback import BRIEFING_RUN_KEY, FeedbackMarkRecord, FeedbackRepository, StoredView
from storage.repositories.http_validators import HttpValidatorRepository
from storage.repositories.inbound import InboundRepository
from storage.repositories.items import ItemRepository
from storage.repositories.monitors import MonitorChanges, MonitorRepository
from storage.repositories.rate_slots import RateSlotRepository, SlotLimit
from storage.repositories.reader_rules import ReaderRuleRepository
from storage.repositories.runs import RunRepository
from storage.repositories.source_failures import SourceFailureRepository
from storage.repositories.subscriptions import SubscriptionRepository
from storage.repositories.turns import TurnRepository
from storage.repositories.usage import UsageRepository

__all__ = [
    "BRIEFING_RUN_KEY",
    "AlertRepository",
    "BriefingClaim",
    "BriefingRepository",
    "ChatChanges",
    "ChatRepository",
    "ConversationRepository",
    "DeliveryRepository",
    "DestinationRecord",
    "DestinationRepository",
    "DigestPageRepository",
    "EmbeddingRepository",
    "FeedSubject",
    "FeedTokenRepository",
    "FeedbackMarkRecord",
    "FeedbackRepository",
    "HttpValidatorRepository",
    "InboundRepository",
    "ItemRepository",
    "MonitorChanges",
    "MonitorRepository",
    "RateSlotRepository",
    "ReaderRuleRepository",
    "RunRepository",
    "SlotLimit",
    "SourceFailureRepository",
    "StoredView",
    "SubscriptionRepository",
    "TurnRepository",
    "UsageRepository",
]
