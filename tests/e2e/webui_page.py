"""Open WebUI's page driven as a person would (sign-in form, chat box), for tests/e2e/test_openwebui.py."""

from __future__ import annotations

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.browser import wait_for

# Long and slow enough (~11 s) that the page shows it growing word by word (a block at the end would not), also
# on a loaded machine where each look at the page takes a second or two.
ANSWER_TEXT = (
    "Saat 14:05, sunucu saatine göre. Bu bilgi sistem bilgisi aracından geldi ve sunucunun kendi saat "
    "dilimine göre verildi; bilgisayarınızdaki saat biraz farklı olabilir."
)
ANSWER = {"content": ANSWER_TEXT, "token_delay": 0.4}


def page_text(page: WebDriver) -> str:
    return str(page.find_element(By.TAG_NAME, "body").text)


def log_in(page: WebDriver, webui: str, email: str, password: str) -> None:
    """Through Open WebUI's sign-in form, as a person would; ends on the chat page."""
    page.get(f"{webui}/auth")
    # 180 s: the first page of a session missed 90 s once, with two suites in their e2e layers on 2 cores
    wait_for(page, lambda p: p.find_element(By.CSS_SELECTOR, "input[type=email]"), 180, "the sign-in form")
    page.find_element(By.CSS_SELECTOR, "input[type=email]").send_keys(email)
    page.find_element(By.CSS_SELECTOR, "input[type=password]").send_keys(password)
    page.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(page, lambda p: p.find_element(By.ID, "chat-input").is_displayed(), 90, "the chat box")


def focus_chat_box(page: WebDriver) -> bool:
    """Close the "What's New" notes a new account gets (they cover the page), then click into the chat box."""
    for notes in page.find_elements(By.XPATH, '//button[contains(., "Okay, Let\'s Go!")]'):
        notes.click()
    page.find_element(By.ID, "chat-input").click()  # raises (and is retried) while something covers it
    return True


# Counted inside the page, at every change of its text: on a loaded machine a look from the test takes seconds and
# could miss a stream of ~10 s entirely. Records how many leading words of the answer each render showed.
WATCH = """
const words = arguments[0];
window.__shown = new Set();
const count = () => {
  const text = document.body.innerText;
  let k = 0;
  while (k < words.length && text.includes(words.slice(0, k + 1).join(' '))) k++;
  window.__shown.add(k);
};
new MutationObserver(count).observe(document.body, {subtree: true, childList: true, characterData: true});
"""


def ask_in_page(page: WebDriver, question: str) -> tuple[str, set[int]]:
    """Type into the chat box and send; returns the page text once the answer's footer is there, and every
    partial length (in words) the answer was shown at on the way (none if it came as one block at the end)."""
    wait_for(page, focus_chat_box, 60, "a clickable chat box")
    words = ANSWER_TEXT.split()
    page.execute_script(WATCH, words)
    page.find_element(By.ID, "chat-input").send_keys(question, Keys.ENTER)
    wait_for(page, lambda p: "Tools used: sistem_bilgisi" in page_text(p), 120, "the answer with its footer")
    shown = {int(k) for k in page.execute_script("return Array.from(window.__shown);")}
    return page_text(page), shown - {0, 1, len(words)}  # 1: "Saat" is also the question's first word
