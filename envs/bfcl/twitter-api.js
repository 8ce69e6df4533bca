// BFCL's TwitterAPI (func_source_code/posting_api.py), ported.
class TwitterAPI {
  _load_scenario(scenario, long_context = false) {
    this.username = scenario.get("username", "john");
    this.password = scenario.get("password", "john123");
    this.authenticated = scenario.get("authenticated", false);
    const tweets = scenario.get("tweets", new Py.PyDict());
    // the original turns the JSON's string keys into int keys; int("x") raises, as there
    this.tweets = new Py.PyDict(tweets.items().map(([k, v]) => [TwitterAPI._int(k), v]));
    this.comments = scenario.get("comments", new Py.PyDict());
    this.retweets = scenario.get("retweets", new Py.PyDict());
    this.following_list = scenario.get("following_list", ["alice", "bob"]);
    this.tweet_counter = scenario.get("tweet_counter", 0n);
  }

  static _int(k) {
    if (typeof k === "bigint") return k;
    const s = Py.strip(String(k)).replace(/_/g, "");
    if (!/^[+-]?\d+$/.test(s)) throw Py.ValueError(`invalid literal for int() with base 10: ${Py.repr(k)}`);
    return BigInt(s);
  }

  authenticate_twitter(username, password) {
    if (Py.eq(username, this.username) && Py.eq(password, this.password)) {
      this.authenticated = true;
      return new Py.PyDict([["authentication_status", true]]);
    }
    return new Py.PyDict([["authentication_status", false]]);
  }

  posting_get_login_status() {
    return new Py.PyDict([["login_status", Py.truthy(this.authenticated)]]);
  }

  post_tweet(content, tags, mentions) {
    if (!Py.truthy(this.authenticated)) return new Py.PyDict([["error", "User not authenticated. Please authenticate before posting."]]);
    const tweet = new Py.PyDict([["id", this.tweet_counter], ["username", this.username], ["content", content], ["tags", tags], ["mentions", mentions]]);
    this.tweets.set(this.tweet_counter, tweet);
    this.tweet_counter = Py.add(this.tweet_counter, 1n);
    return tweet;
  }

  retweet(tweet_id) {
    if (!Py.truthy(this.authenticated)) return new Py.PyDict([["error", "User not authenticated. Please authenticate before retweeting."]]);
    if (!Py.contains(this.tweets, tweet_id)) return new Py.PyDict([["error", `Tweet with ID ${Py.str(tweet_id)} not found.`]]);
    if (!Py.contains(this.retweets, this.username)) this.retweets.set(this.username, []);
    const mine = this.retweets.item(this.username);
    if (Py.contains(mine, tweet_id)) return new Py.PyDict([["retweet_status", "Already retweeted"]]);
    mine.push(tweet_id);
    return new Py.PyDict([["retweet_status", "Successfully retweeted"]]);
  }

  comment(tweet_id, comment_content) {
    if (!Py.truthy(this.authenticated)) return new Py.PyDict([["error", "User not authenticated. Please authenticate before commenting."]]);
    if (!Py.contains(this.tweets, tweet_id)) return new Py.PyDict([["error", `Tweet with ID ${Py.str(tweet_id)} not found.`]]);
    if (!Py.contains(this.comments, tweet_id)) this.comments.set(tweet_id, []);
    this.comments.item(tweet_id).push(new Py.PyDict([["username", this.username], ["content", comment_content]]));
    return new Py.PyDict([["comment_status", "Comment added successfully"]]);
  }

  mention(tweet_id, mentioned_usernames) {
    if (!Py.contains(this.tweets, tweet_id)) return new Py.PyDict([["error", `Tweet with ID ${Py.str(tweet_id)} not found.`]]);
    const tweet = this.tweets.item(tweet_id);
    const list = tweet.item("mentions");
    if (!Array.isArray(list)) throw BfclRuntime.noAttr(list, "extend");
    list.push(...Py.iter(mentioned_usernames)); // extends the stored list in place (possibly the shared default)
    return new Py.PyDict([["mention_status", "Users mentioned successfully"]]);
  }

  follow_user(username_to_follow) {
    if (!Py.truthy(this.authenticated)) return new Py.PyDict([["error", "User not authenticated. Please authenticate before following."]]);
    if (Py.contains(this.following_list, username_to_follow)) return new Py.PyDict([["follow_status", false]]);
    this.following_list.push(username_to_follow);
    return new Py.PyDict([["follow_status", true]]);
  }

  list_all_following() {
    if (!Py.truthy(this.authenticated)) return new Py.PyDict([["error", "User not authenticated. Please authenticate before listing following."]]);
    return new Py.PyDict([["following_list", this.following_list]]);
  }

  unfollow_user(username_to_unfollow) {
    if (!Py.truthy(this.authenticated)) return new Py.PyDict([["error", "User not authenticated. Please authenticate before unfollowing."]]);
    if (!Py.contains(this.following_list, username_to_unfollow)) return new Py.PyDict([["unfollow_status", false]]);
    this.following_list.splice(this.following_list.findIndex((u) => Py.eq(u, username_to_unfollow)), 1);
    return new Py.PyDict([["unfollow_status", true]]);
  }

  get_tweet(tweet_id) {
    if (!Py.contains(this.tweets, tweet_id)) return new Py.PyDict([["error", `Tweet with ID ${Py.str(tweet_id)} not found.`]]);
    return this.tweets.item(tweet_id);
  }

  get_user_tweets(username) {
    return this.tweets.values().filter((t) => Py.eq(t.item("username"), username));
  }

  search_tweets(keyword) {
    // keyword.lower() runs per tweet in the original's comprehension: no tweets, no error
    return this.tweets.values().filter((t) => {
      const kw = BfclRuntime.strOnly(keyword, "lower").toLowerCase();
      if (BfclRuntime.strOnly(t.item("content"), "lower").toLowerCase().includes(kw)) return true;
      return Py.iter(t.item("tags")).map((tag) => BfclRuntime.strOnly(tag, "lower").toLowerCase()).includes(kw);
    });
  }

  get_tweet_comments(tweet_id) {
    if (!Py.contains(this.tweets, tweet_id)) return new Py.PyDict([["error", `Tweet with ID ${Py.str(tweet_id)} not found.`]]);
    return this.comments.get(tweet_id, []);
  }

  get_user_stats(username) {
    const tweet_count = BigInt(this.tweets.values().filter((t) => Py.eq(t.item("username"), username)).length);
    const following_count = Py.eq(username, this.username) ? Py.len(this.following_list) : 0n;
    const retweet_count = Py.len(this.retweets.get(username, []));
    return new Py.PyDict([["tweet_count", tweet_count], ["following_count", following_count], ["retweet_count", retweet_count]]);
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
