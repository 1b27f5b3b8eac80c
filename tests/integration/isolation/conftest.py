"""Leave the host as found, as the image tests do."""

from tests.integration.images.conftest import clean_host as clean_host
