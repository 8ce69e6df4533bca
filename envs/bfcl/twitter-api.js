// BFCL's TwitterAPI (func_source_code/posting_api.py), ported.
class TwitterAPI {
  _load_scenario(scenario, long_context = false) {
    this.username = scenario.get("username", "john");
    this.password = scenario.get("password", "john123");
    this.authenticated = scenario.get("authenticated", false);
    const tweets = scenario.get("tweets", new PyText.PyDict());
    // the original turns the JSON's string keys into int keys; int("x") raises, as there
    this.tweets = new PyText.PyDict(tweets.items().map(([k, v]) => [TwitterAPI._int(k), v]));
    this.comments = scenario.get("comments", new PyText.PyDict());
    this.retweets = scenario.get("retweets", new PyText.PyDict());
    this.following_list = scenario.get("following_list", ["alice", "bob"]);
    this.tweet_counter = scenario.get("tweet_counter", 0n);
  }

  static _int(k) {
    if (typeof k === "bigint") return k;
    const s = PyText.strip(String(k)).replace(/_/g, "");
    if (!/^[+-]?\d+$/.test(s)) throw PyText.ValueError(`invalid literal for int() with base 10: ${PyText.repr(k)}`);
    return BigInt(s);
  }

  authenticate_twitter(username, password) {
    if (PyText.eq(username, this.username) && PyText.eq(password, this.password)) {
      this.authenticated = true;
      return new PyText.PyDict([["authentication_status", true]]);
    }
    return new PyText.PyDict([["authentication_status", false]]);
  }

  posting_get_login_status() {
    return new PyText.PyDict([["login_status", PyText.truthy(this.authenticated)]]);
  }

  post_tweet(content, tags, mentions) {
    if (!PyText.truthy(this.authenticated)) return new PyText.PyDict([["error", "User not authenticated. Please authenticate before posting."]]);
    const tweet = new PyText.PyDict([["id", this.tweet_counter], ["username", this.username], ["content", content], ["tags", tags], ["mentions", mentions]]);
    this.tweets.set(this.tweet_counter, tweet);
    this.tweet_counter = PyText.add(this.tweet_counter, 1n);
    return tweet;
  }

  retweet(tweet_id) {
    if (!PyText.truthy(this.authenticated)) return new PyText.PyDict([["error", "User not authenticated. Please authenticate before retweeting."]]);
    if (!PyText.contains(this.tweets, tweet_id)) return new PyText.PyDict([["error", `Tweet with ID ${PyText.str(tweet_id)} not found.`]]);
    if (!PyText.contains(this.retweets, this.username)) this.retweets.set(this.username, []);
    const mine = this.retweets.item(this.username);
    if (PyText.contains(mine, tweet_id)) return new PyText.PyDict([["retweet_status", "Already retweeted"]]);
    mine.push(tweet_id);
    return new PyText.PyDict([["retweet_status", "Successfully retweeted"]]);
  }

  comment(tweet_id, comment_content) {
    if (!PyText.truthy(this.authenticated)) return new PyText.PyDict([["error", "User not authenticated. Please authenticate before commenting."]]);
    if (!PyText.contains(this.tweets, tweet_id)) return new PyText.PyDict([["error", `Tweet with ID ${PyText.str(tweet_id)} not found.`]]);
    if (!PyText.contains(this.comments, tweet_id)) this.comments.set(tweet_id, []);
    this.comments.item(tweet_id).push(new PyText.PyDict([["username", this.username], ["content", comment_content]]));
    return new PyText.PyDict([["comment_status", "Comment added successfully"]]);
  }

  mention(tweet_id, mentioned_usernames) {
    if (!PyText.contains(this.tweets, tweet_id)) return new PyText.PyDict([["error", `Tweet with ID ${PyText.str(tweet_id)} not found.`]]);
    const tweet = this.tweets.item(tweet_id);
    const list = tweet.item("mentions");
    if (!Array.isArray(list)) throw BfclRuntime.noAttr(list, "extend");
    list.push(...PyText.iter(mentioned_usernames)); // extends the stored list in place (possibly the shared default)
    return new PyText.PyDict([["mention_status", "Users mentioned successfully"]]);
  }

  follow_user(username_to_follow) {
    if (!PyText.truthy(this.authenticated)) return new PyText.PyDict([["error", "User not authenticated. Please authenticate before following."]]);
    if (PyText.contains(this.following_list, username_to_follow)) return new PyText.PyDict([["follow_status", false]]);
    this.following_list.push(username_to_follow);
    return new PyText.PyDict([["follow_status", true]]);
  }

  list_all_following() {
    if (!PyText.truthy(this.authenticated)) return new PyText.PyDict([["error", "User not authenticated. Please authenticate before listing following."]]);
    return new PyText.PyDict([["following_list", this.following_list]]);
  }

  unfollow_user(username_to_unfollow) {
    if (!PyText.truthy(this.authenticated)) return new PyText.PyDict([["error", "User not authenticated. Please authenticate before unfollowing."]]);
    if (!PyText.contains(this.following_list, username_to_unfollow)) return new PyText.PyDict([["unfollow_status", false]]);
    this.following_list.splice(this.following_list.findIndex((u) => PyText.eq(u, username_to_unfollow)), 1);
    return new PyText.PyDict([["unfollow_status", true]]);
  }

  get_tweet(tweet_id) {
    if (!PyText.contains(this.tweets, tweet_id)) return new PyText.PyDict([["error", `Tweet with ID ${PyText.str(tweet_id)} not found.`]]);
    return this.tweets.item(tweet_id);
  }

  get_user_tweets(username) {
    return this.tweets.values().filter((t) => PyText.eq(t.item("username"), username));
  }

  search_tweets(keyword) {
    // keyword.lower() runs per tweet in the original's comprehension: no tweets, no error
    return this.tweets.values().filter((t) => {
      const kw = BfclRuntime.strOnly(keyword, "lower").toLowerCase();
      if (BfclRuntime.strOnly(t.item("content"), "lower").toLowerCase().includes(kw)) return true;
      return PyText.iter(t.item("tags")).map((tag) => BfclRuntime.strOnly(tag, "lower").toLowerCase()).includes(kw);
    });
  }

  get_tweet_comments(tweet_id) {
    if (!PyText.contains(this.tweets, tweet_id)) return new PyText.PyDict([["error", `Tweet with ID ${PyText.str(tweet_id)} not found.`]]);
    return this.comments.get(tweet_id, []);
  }

  get_user_stats(username) {
    const tweet_count = BigInt(this.tweets.values().filter((t) => PyText.eq(t.item("username"), username)).length);
    const following_count = PyText.eq(username, this.username) ? PyText.len(this.following_list) : 0n;
    const retweet_count = PyText.len(this.retweets.get(username, []));
    return new PyText.PyDict([["tweet_count", tweet_count], ["following_count", following_count], ["retweet_count", retweet_count]]);
  }
}
// the list defaults are created once and shared by every call that omits them, as in Python
TwitterAPI.SIGNATURES = {
  authenticate_twitter: [["username"], ["password"]],
  posting_get_login_status: [],
  post_tweet: [["content"], ["tags", []], ["mentions", []]],
  retweet: [["tweet_id"]],
  comment: [["tweet_id"], ["comment_content"]],
  mention: [["tweet_id"], ["mentioned_usernames"]],
  follow_user: [["username_to_follow"]],
  list_all_following: [],
  unfollow_user: [["username_to_unfollow"]],
  get_tweet: [["tweet_id"]],
  get_user_tweets: [["username"]],
  search_tweets: [["keyword"]],
  get_tweet_comments: [["tweet_id"]],
  get_user_stats: [["username"]],
};
